"""`local`: every client trains alone on its private data — the reference for comparisons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.algorithms.hyperparameters import EpochSchedule
from cosmosfl.core.tasks import TrainLocal


@dataclass
class Local(EpochSchedule, Algorithm):
    """No communication beyond evaluation; same local epochs as COSMOS (E0 in round 1, then E)."""

    name: ClassVar[str] = "local"
    reported_model: ClassVar[str] = "client_model"
    reference: ClassVar[bool] = True

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        epochs = self.epochs_for(round_num == 1)
        with fed.phase("local_training"):
            fed.send(dict.fromkeys(fed.client_ids, TrainLocal(epochs)))
        with fed.phase("evaluation"):
            record.add_metrics("client_model", evaluate_clients(fed))
        return record
