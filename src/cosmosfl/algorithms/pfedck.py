"""pFedCK: a personalized federated learning method based on clustering and knowledge
distillation (Zhang & Shi, 2024).

Each client has two models of the same architecture: an *interactive* model that takes part in
federated training and a *personalized* model that is trained only locally. They distil into
each other on the client's private data (mutual distillation: cross-entropy on the labels plus
KL towards the other model's soft predictions). Every round the server clusters the clients by
the similarity of their interactive models' updates (parameter change during local training)
and averages the interactive models within each cluster, so a client only receives knowledge
from clients with similar data. The personalized model is the one we report
(`personal_model`).

On the client, the personalized model is the client's own model (`learner`), the interactive
one lives in the model slot "interactive"; distillation runs on the client (`train_local` with
`distill_from`, `kd_weight`, `kd_temperature`).

Hyperparameters (source):
- `num_clusters` = 5: K for k-means on the clients' updates. The abstract does not name the
  clustering algorithm or K; we use k-means on L2-normalised update vectors (cosine geometry),
  re-clustered every round ("during every training round"), and K = 5, the number of class
  groups of the COSMOS split (as COMET's K).
- `kd_weight` = 1.0, `kd_temperature` = 1.0: weight and temperature of the KL term (deep
  mutual learning's equal weighting; our choice, the abstract gives none).
- `pretrain_epochs` = 5, `local_epochs` = 5: local epochs of each model per round (our
  conventions, as FedAvg).

Deviations: the paper also distils middle-layer feature representations; our learners expose
only predictions, so distillation uses soft predictions only. We distil sequentially (the
interactive model learns from the personalized one, then the personalized from the updated
interactive one) rather than in one joint step.

Wire: per client and round, one interactive model down and up (float32), plus one upload of the
initial weights in round 1. The personalized model never leaves the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cosmosfl.algorithms.base import (
    Algorithm,
    Federation,
    RoundRecord,
    evaluate_clients,
    iter_clusters,
)
from cosmosfl.algorithms.hyperparameters import CLUSTER_COUNT, EpochSchedule
from cosmosfl.algorithms.params import (
    Weights,
    check_same_architecture,
    fetch_weights,
    push_weights,
    weighted_mean,
)
from cosmosfl.core import protocol
from cosmosfl.core.constraints import Interval
from cosmosfl.core.kmeans import kmeans_clusters
from cosmosfl.core.seeds import derive_seed
from cosmosfl.core.tasks import OWN_MODEL, Request, always_sent

INTERACTIVE_SLOT = "interactive"


@dataclass(frozen=True)
class MutualTrain(Request):
    """train_local of the model in `slot` on labels plus kd_weight·T²·KL towards the
    predictions of the model in slot `distill_from` (T = kd_temperature)."""

    task: ClassVar[str] = protocol.TRAIN_LOCAL
    epochs: int = always_sent(1)
    slot: str = OWN_MODEL
    distill_from: str = always_sent(OWN_MODEL)
    kd_weight: float = always_sent(1.0)
    kd_temperature: float = always_sent(1.0)


def cluster_updates(deltas: dict[int, Weights], num_clusters: int, seed: int) -> dict[int, int]:
    """k-means on the clients' L2-normalised update vectors; clusters numbered by smallest id
    (core/kmeans.py); K is capped at the number of clients."""
    ids = sorted(deltas)
    if not ids:
        return {}
    x = np.stack([np.concatenate([a.ravel() for a in deltas[c].values()]) for c in ids])
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return kmeans_clusters(dict(zip(ids, x, strict=True)), min(num_clusters, len(ids)), seed)


@dataclass
class PFedCK(EpochSchedule, Algorithm):
    """Interactive models averaged within update-similarity clusters; personalized models
    trained locally with mutual distillation."""

    name: ClassVar[str] = "pfedck"
    display_name: ClassVar[str] = "pFedCK"
    reported_model: ClassVar[str] = "personal_model"
    model_agnostic: ClassVar[bool] = False
    client_handlers: ClassVar[str] = "cosmosfl.handlers.pfedck:HANDLERS"
    parameter_constraints: ClassVar = {
        "num_clusters": CLUSTER_COUNT,
        "kd_weight": Interval(float, 0),
        "kd_temperature": Interval(float, 0, closed="neither"),
    }

    num_clusters: int = 5
    kd_weight: float = 1.0
    kd_temperature: float = 1.0
    _template: Weights | None = field(default=None, init=False, repr=False)
    # The interactive model each client receives next (its cluster's average).
    _models: dict[int, Weights] = field(default_factory=dict, init=False, repr=False)
    _clusters: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        if self._template is None:
            with fed.phase("initialisation"):
                fetched, _ = fetch_weights(fed, fed.client_ids, self.name, None, INTERACTIVE_SLOT)
                self._template = check_same_architecture(fetched, self.name)
                # One starting interactive model for everyone, as FedAvg.
                self._models = {cid: self._template for cid in fed.client_ids}
        with fed.phase("broadcast"):
            sent = {cid: self._models[cid] for cid in fed.client_ids}
            ready = sorted(push_weights(fed, sent, INTERACTIVE_SLOT))
        epochs = self.epochs_for(round_num == 1)
        kd = {"kd_weight": float(self.kd_weight), "kd_temperature": float(self.kd_temperature)}
        with fed.phase("local_training"):  # interactive model learns from labels + personal
            request = MutualTrain(epochs, slot=INTERACTIVE_SLOT, distill_from=OWN_MODEL, **kd)
            trained = fed.send(dict.fromkeys(ready, request))
        with fed.phase("personal_training"):  # personalized model learns from labels + interactive
            request = MutualTrain(epochs, distill_from=INTERACTIVE_SLOT, **kd)
            fed.send(dict.fromkeys(ready, request))
        with fed.phase("upload"):
            fetched, counts = fetch_weights(
                fed, sorted(trained), self.name, self._template, INTERACTIVE_SLOT
            )
        with fed.phase("clustering"):
            if fetched:
                deltas = {c: {n: w[n] - sent[c][n] for n in w} for c, w in fetched.items()}
                # 31 bits, as pFedCK's k-means seed has always been (the records stay as they were).
                seed = derive_seed(fed.seed, self.name, round_num) % 2**31
                self._clusters.update(cluster_updates(deltas, self.num_clusters, seed))
        with fed.phase("aggregation"):
            answered = {c: self._clusters[c] for c in fetched}
            for _, members in iter_clusters(answered):
                mean = weighted_mean([fetched[c] for c in members], [counts[c] for c in members])
                for c in members:
                    self._models[c] = mean
        with fed.phase("evaluation"):
            record.add_metrics("personal_model", evaluate_clients(fed))
        record.info["clusters"] = dict(answered)
        record.info["K"] = len(set(answered.values()))
        record.info["participants"] = len(fetched)
        return record

    def get_state(self) -> dict[str, Any]:
        return {
            "template": None
            if self._template is None
            else {n: a.copy() for n, a in self._template.items()},
            "models": {c: {n: a.copy() for n, a in w.items()} for c, w in self._models.items()},
            "clusters": dict(self._clusters),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        t = state["template"]
        self._template = None if t is None else {n: np.asarray(a) for n, a in t.items()}
        self._models = {
            int(c): {n: np.asarray(a) for n, a in w.items()} for c, w in state["models"].items()
        }
        self._clusters = {int(c): int(k) for c, k in state["clusters"].items()}
