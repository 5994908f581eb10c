"""A user's algorithm written outside the package, as the plug-in tests register it: clients
train on their private data, then distil the sharpened mean of everyone's soft labels on U.

Nothing here is imported by cosmosfl; tests register `ToyMean` (and undo it), and the shell
test installs this file as a package that declares it in the `cosmosfl.algorithms` group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.algorithms.hyperparameters import EPOCHS, EpochSchedule
from cosmosfl.core.constraints import Interval
from cosmosfl.core.tasks import Distill, PredictPublic, TrainLocal


@dataclass
class ToyMean(EpochSchedule, Algorithm):
    """E0 / E local epochs, then distillation towards the mean soft labels raised to
    `sharpen` (1 = the plain mean)."""

    name: ClassVar[str] = "toymean"
    display_name: ClassVar[str] = "ToyMean"
    parameter_constraints: ClassVar = {
        "distill_epochs": EPOCHS,
        "sharpen": Interval(float, 0, closed="neither"),
    }

    distill_epochs: int = 1
    sharpen: float = 1.0

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        with fed.phase("local_training"):
            fed.send(dict.fromkeys(fed.client_ids, TrainLocal(self.epochs_for(round_num == 1))))
        with fed.phase("prediction"):
            replies = fed.send(dict.fromkeys(fed.client_ids, PredictPublic()))
            mean = np.mean([r.arrays["probs"] for r in replies.values()], axis=0) ** self.sharpen
            targets = (mean / mean.sum(axis=1, keepdims=True)).astype(np.float32)
        with fed.phase("client_distillation"):
            fed.send(dict.fromkeys(replies, Distill(targets, epochs=self.distill_epochs)))
        with fed.phase("evaluation"):
            record.add_metrics("client_model", evaluate_clients(fed))
        return record
