"""FedMD: heterogeneous federated learning via model distillation (Li & Wang, 2019).

Each round every client sends its soft labels on the public set U; the server averages all of
them into one consensus; every client *digests* the consensus (distills to it on U) and then
*revisits* its private data (a few epochs of cross-entropy). No clustering: one consensus for
everyone. Only soft labels on U cross the wire.

Hyperparameters (source):
- `pretrain_epochs` = 5: round-1 local training on private data (our E0 convention, as COSMOS).
  The paper's transfer learning first trains on a *labelled* public set and then on private
  data; our U is unlabelled, so pre-training uses the private data only.
- `distill_epochs` = 5: the digest epochs on U (our convention; the paper tunes per dataset).
- `local_epochs` = 5: the revisit epochs on private data (our convention, as COSMOS).
- `aggregation` = "mean", `temperature` = 1: the paper averages the clients' scores (sec. 2);
  T acts on the consensus as in COSMOS (docs/cosmos.md).
- `trim_fraction` = 0.2: only for `aggregation: trimmed_mean` (same meaning as in COSMOS).
- `lam` = 0: FedMD has no consistency regulariser r_B (our naming, shared with COSMOS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.algorithms.hyperparameters import CONSISTENCY_WEIGHT, EPOCHS, TEACHER, EpochSchedule
from cosmosfl.core.aggregation import aggregate, apply_temperature
from cosmosfl.core.tasks import Distill, PredictPublic, TrainLocal


@dataclass
class FedMD(EpochSchedule, Algorithm):
    """FedMD: communicate → aggregate (one consensus) → digest → revisit, every round."""

    name: ClassVar[str] = "fedmd"
    display_name: ClassVar[str] = "FedMD"
    reported_model: ClassVar[str] = "client_model"
    parameter_constraints: ClassVar = {
        "distill_epochs": EPOCHS,
        **TEACHER,
        "lam": CONSISTENCY_WEIGHT,
    }

    distill_epochs: int = 5  # digest
    aggregation: str = "mean"
    trim_fraction: float = 0.2
    temperature: float = 1.0
    lam: float = 0.0

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        if round_num == 1:  # transfer learning, private data only (no labelled public set)
            with fed.phase("local_training"):
                message = TrainLocal(self.pretrain_epochs)
                fed.send(dict.fromkeys(fed.client_ids, message))
        with fed.phase("prediction"):  # communicate
            replies = fed.send(dict.fromkeys(fed.client_ids, PredictPublic()))
            probs = [np.asarray(replies[cid].arrays["probs"]) for cid in sorted(replies)]
        with fed.phase("aggregation"):  # aggregate: one consensus over all answering clients
            consensus = apply_temperature(
                aggregate(probs, self.aggregation, trim_fraction=self.trim_fraction),
                self.temperature,
            )
        with fed.phase("client_distillation"):  # digest
            digest = Distill(consensus, epochs=self.distill_epochs, lam=self.lam)
            fed.send(dict.fromkeys(fed.client_ids, digest))
        with fed.phase("local_training"):  # revisit
            revisit = TrainLocal(self.local_epochs)
            fed.send(dict.fromkeys(fed.client_ids, revisit))
        with fed.phase("evaluation"):  # the model FedMD deploys: after the revisit
            record.add_metrics("client_model", evaluate_clients(fed))
        return record
