"""COMET: clustered knowledge transfer between heterogeneous clients (Cho et al., IEEE JSTSP 2023).

Each round clients train locally and send their soft labels on the public set U; the server
groups clients by k-means on their (flattened) soft-label matrices, re-clustering every round;
each cluster's teacher is the mean of its members' soft labels; each client distills towards its
own cluster's teacher. COMET's client objective, local cross-entropy + λ_KD · distance to the
cluster teacher, is realised here as the alternation of local training and distillation.

Hyperparameters (source):
- `num_clusters` = 5: K of k-means (the paper's K is a hyperparameter; 5 = the number of class
  groups in the COSMOS split, and the COSMOS paper's tuning goal). Capped at the number of
  clients that answered. k-means: scikit-learn, `n_init=10`, seeded per round (ours).
- `pretrain_epochs` = 5, `local_epochs` = 5, `distill_epochs` = 5: our E0 / per-round
  conventions, as COSMOS (docs/cosmos.md).
- `aggregation` = "mean": COMET's cluster-wise average of soft labels; `trim_fraction` = 0.2
  only for `trimmed_mean` (as COSMOS). `temperature` = 1: T on the teacher, as COSMOS.
- `lam` = 0: the weight of the consistency regulariser r_B in the distillation step (COSMOS's
  name); COMET has none. COMET's own KD weight is not a setting here: see docs/baselines.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cosmosfl.algorithms.base import (
    Algorithm,
    Federation,
    RoundRecord,
    evaluate_clients,
    iter_clusters,
    train_local_with_pretraining,
)
from cosmosfl.algorithms.hyperparameters import (
    CLUSTER_COUNT,
    CONSISTENCY_WEIGHT,
    EPOCHS,
    TEACHER,
    EpochSchedule,
)
from cosmosfl.core import kmeans
from cosmosfl.core.aggregation import aggregate, apply_temperature
from cosmosfl.core.seeds import derive_seed
from cosmosfl.core.tasks import Distill, PredictPublic


def kmeans_clusters(probs: Mapping[int, np.ndarray], k: int, seed: int) -> dict[int, int]:
    """k-means on clients' flattened soft-label matrices f_i(U) (float64): {client id: cluster},
    numbered by smallest member id (core/kmeans.py). Needs 1 <= k <= len(probs)."""
    return kmeans.kmeans_clusters(
        {c: np.asarray(p, dtype=np.float64) for c, p in probs.items()}, k, seed
    )


@dataclass
class Comet(EpochSchedule, Algorithm):
    """COMET: local training → soft labels → k-means clusters → distill the cluster teacher."""

    name: ClassVar[str] = "comet"
    display_name: ClassVar[str] = "COMET"
    reported_model: ClassVar[str] = "client_model"
    parameter_constraints: ClassVar = {
        "num_clusters": CLUSTER_COUNT,
        "distill_epochs": EPOCHS,
        **TEACHER,
        "lam": CONSISTENCY_WEIGHT,
    }

    num_clusters: int = 5  # K
    distill_epochs: int = 5
    aggregation: str = "mean"
    trim_fraction: float = 0.2
    temperature: float = 1.0
    lam: float = 0.0

    # server state: this round's clusters (re-formed every round)
    assignment: dict[int, int] = field(default_factory=dict, init=False)
    # Clients that have finished local training once (they get E0 epochs until they have).
    pretrained: set[int] = field(default_factory=set, init=False)

    def get_state(self) -> dict[str, Any]:
        return {"assignment": dict(self.assignment), "pretrained": sorted(self.pretrained)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.assignment = {int(c): int(k) for c, k in state["assignment"].items()}
        self.pretrained = set(state.get("pretrained", self.assignment))

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        with fed.phase("local_training"):
            trained = train_local_with_pretraining(fed, self.pretrained, self.epochs_for)
        with fed.phase("prediction"):
            replies = fed.send(dict.fromkeys(fed.client_ids, PredictPublic()))
            probs = {cid: np.asarray(r.arrays["probs"]) for cid, r in replies.items()}
            self.pretrained.update(trained)  # read after the prediction's (no round trip)
        with fed.phase("evaluation"):
            record.add_metrics("local", evaluate_clients(fed))  # after local training

        with fed.phase("clustering"):
            k = min(self.num_clusters, len(probs))
            if k < self.num_clusters:
                fed.log(f"COMET: num_clusters={self.num_clusters} capped at K={k} (clients)")
            self.assignment = kmeans_clusters(probs, k, derive_seed(fed.seed, "comet", round_num))

        with fed.phase("client_distillation"):
            teachers = {  # cluster teacher: aggregate of its members' f_i(U), then T
                c: self._teacher([probs[i] for i in members])
                for c, members in iter_clusters(self.assignment)
            }
            config = {"epochs": self.distill_epochs, "lam": self.lam}
            fed.send({cid: Distill(teachers[c], **config) for cid, c in self.assignment.items()})
        with fed.phase("evaluation"):
            record.add_metrics("client_model", evaluate_clients(fed))  # after distillation

        record.info.update(
            clusters={int(c): int(k) for c, k in sorted(self.assignment.items())},
            K=len(teachers),
            threshold=None,
        )
        return record

    def _teacher(self, members: list[np.ndarray]) -> np.ndarray:
        mean = aggregate(members, self.aggregation, trim_fraction=self.trim_fraction)
        return apply_temperature(mean, self.temperature)
