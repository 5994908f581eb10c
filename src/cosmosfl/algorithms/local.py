"""`local`: every client trains alone on its private data — the reference for comparisons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.core.tasks import TrainLocal


@dataclass
class Local(Algorithm):
    """No communication beyond evaluation; same local epochs as COSMOS (E0 in round 1, then E)."""

    name: ClassVar[str] = "local"
    primary_model: ClassVar[str] = "client_model"

    pretrain_epochs: int = 5
    local_epochs: int = 5

    def __post_init__(self) -> None:
        for name in ("pretrain_epochs", "local_epochs"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        epochs = self.pretrain_epochs if round_num == 1 else self.local_epochs
        with fed.phase("local_training"):
            fed.send(dict.fromkeys(fed.client_ids, TrainLocal(epochs)))
        with fed.phase("evaluation"):
            record.add_metrics("client_model", evaluate_clients(fed))
        return record
