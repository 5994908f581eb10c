"""COSMOS: Clustered Output-based Server Models (paper, section 4).

Round t = 1 is the pre-training and clustering (PTC) phase; rounds t >= 2 are the iterative
federated fine-tuning (IFFT) phase:

    PTC   (1) clients pre-train f_i on D_i for E0 epochs, send f_i^(1,1)(U)
          (2) server clusters clients by pseudo-label distance (Algorithm 1, threshold B0)
          (3) server trains one model h_k per cluster on U: KL(h_k, f̄_k) + λ·r_B
          (4) clients distill h_π(i)(U) into f_i (KL + λ·r_B, weights w_i(x)) -> f_i^(1,2)
    IFFT  clients fine-tune on D_i -> f_i^(t,1)(U) -> server fine-tunes h_k on the new f̄_k
          -> clients distill h_π(i)(U) -> f_i^(t,2)

Only soft labels on U cross the wire; no model parameters ever do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cosmosfl.algorithms.base import (
    Algorithm,
    Federation,
    RoundRecord,
    ServerLearnerFactory,
    deferred,
    evaluate_clients,
    iter_clusters,
    map_public,
    reply_metrics,
    train_local_with_pretraining,
)
from cosmosfl.algorithms.cosmos_membership import ClusterMembership
from cosmosfl.algorithms.hyperparameters import CONSISTENCY_WEIGHT, EPOCHS, TEACHER, EpochSchedule
from cosmosfl.algorithms.selection import select_on_validation
from cosmosfl.core import codecs, l1_kernel, protocol
from cosmosfl.core.aggregation import aggregate, apply_temperature
from cosmosfl.core.cluster_choice import CLUSTERINGS
from cosmosfl.core.clustering import (
    DISTANCE_BACKENDS,
    DISTANCES,
    THRESHOLD_RULES,
    THRESHOLD_SEARCHES,
)
from cosmosfl.core.constraints import Interval, Options
from cosmosfl.core.seeds import derive_seed
from cosmosfl.core.tasks import Distill, PredictPublic
from cosmosfl.learners.base import Learner
from cosmosfl.models.init import HEAD_INITS
from cosmosfl.models.registry import model_names

PublicProbe = Callable[[list[int], np.ndarray, np.ndarray, list[np.ndarray]], dict[str, float]]
CLIENT_TARGETS = ("cluster_model", "teacher")


@dataclass
class Cosmos(ClusterMembership, EpochSchedule, Algorithm):
    """COSMOS with the paper's defaults (PAPER_NOTES.md), except the server model size.

    The round is here; who belongs to which cluster (round-1 clustering, late joiners) is
    `ClusterMembership`'s (cosmos_membership.py).
    """

    name: ClassVar[str] = "cosmos"
    display_name: ClassVar[str] = "COSMOS"
    reported_model: ClassVar[str] = "cluster_model"
    # Defaults that changed, with what a config that does not set them gets told (show-config
    # and every run's header), so a run that relied on the old default does not change silently.
    changed_defaults: ClassVar[dict[str, str]] = {
        "clustering": (
            "COSMOS's default clustering is average-linkage with K chosen by the silhouette "
            "since cosmosfl 0.3 (was greedy, the paper's Algorithm 1, with B0 for "
            "target_clusters 5); set algorithm.clustering: greedy for the paper's method"
        ),
    }
    parameter_constraints: ClassVar = {
        "threshold": Interval(float, 0, none="chosen by threshold_rule", symbol="B0"),
        "target_clusters": Interval(int, 1, none="B0 given or chosen by threshold_rule"),
        "threshold_rule": Options(("auto", *THRESHOLD_RULES)),
        "clustering": Options(CLUSTERINGS),
        "distance": Options(DISTANCES),
        **TEACHER,
        "lam": CONSISTENCY_WEIGHT,
        "server_epochs": EPOCHS,
        "distill_epochs": EPOCHS,
        "client_weights": Options(protocol.CLIENT_WEIGHTS),
        "server_width": Interval(float, 0, closed="neither"),
        "server_batch_size": Interval(int, 1),
        "server_lr": Interval(float, 0, closed="neither"),
        "server_head_init": Options(HEAD_INITS),
        "distance_sample": Interval(int, 1, none="exact, all of U"),
        "distance_backend": Options(DISTANCE_BACKENDS),
        "threshold_search": Options(THRESHOLD_SEARCHES),
        "client_targets": Options(CLIENT_TARGETS),
    }

    threshold: float | None = None  # B0 of Algorithm 1; K is then an output
    # Instead of B0: the smallest B0 giving at most this many clusters (for average linkage:
    # the dendrogram cut into this many). With clustering greedy and neither set,
    # target_clusters = 5, the paper's tuning goal (B0 tuned so that K is about 5).
    target_clusters: int | None = None
    # How B0 is chosen when `threshold` is not fixed: "target" (at most target_clusters
    # clusters), "silhouette" (the partition with the largest silhouette), or "largest-gap" /
    # "widest-interval" (K from the distances alone; core/clustering.py). "auto": "target" for
    # greedy or when threshold / target_clusters is given, else "silhouette".
    threshold_rule: str = "auto"
    # How clients are clustered at that B0: "average-linkage" (the default since 0.3: a
    # dendrogram cut, robust to single noisy distances; core/linkage.py) or "greedy" (the
    # paper's Algorithm 1). Chosen from the measured settings (docs/cosmos.md, "Clustering"):
    # with K by the silhouette it recovered the groups where Algorithm 1 with B0 for K = 5 did
    # not (Fashion-MNIST, digits) and matched it where Algorithm 1 was exact (CIFAR-10).
    clustering: str = "average-linkage"
    distance: str = "l1"
    aggregation: str = "mean"
    trim_fraction: float = 0.2
    temperature: float = 1.0
    lam: float = 5.0  # λ, weight of the consistency regulariser r_B
    server_epochs: int = 5
    distill_epochs: int = 5
    recluster: bool = False
    client_weights: str = "uniform"  # w_i(x) = 1 (paper) or "label-prior"
    # h_k's architecture from the model registry; "auto": mlp for feature vectors, cnn for
    # images (the paper names VGG16; docs/ablations.md measured cnn, resnet8 and vgg11).
    server_model: str = "auto"
    server_width: float = 1.0
    server_batch_size: int = 32
    server_lr: float = 1e-4
    # Initial weights of h_k's last layer: "kaiming" (the paper's init everywhere, which makes
    # new server models start with large logits) or "default" (PyTorch's Linear init,
    # U(±1/sqrt(fan_in)), zero bias: near-uniform initial predictions).
    server_head_init: str = "kaiming"
    # Performance (docs/performance.md). codec: how soft labels travel both ways (float32,
    # float16, uint8, top<k>). distance_sample: estimate distances on this many rows of U
    # (None: exact, all of U). distance_backend: torch, numba (compiled ℓ1 kernel, needs
    # cosmosfl[fast]) or auto (numba for thousands of clients when installed).
    # threshold_search: how B0 is found for target_clusters.
    codec: str = "float32"
    distance_sample: int | None = None
    distance_backend: str = "auto"
    threshold_search: str = "auto"
    # Diagnostic, not the paper's method: what clients distill from, "cluster_model" (h_k(U),
    # the paper) or "teacher" (the cluster's aggregated pseudo-labels f̄_k(U) directly, as
    # COMET does), everything else equal; it isolates what the server model adds.
    client_targets: str = "cluster_model"
    # Extension, not the paper's method: each client also measures h_π(i) and its own model
    # f_i^(t,1) on its validation slice (private data held out of training,
    # data.validation_fraction) and keeps the better one (ties: h_π(i)); its test accuracy is
    # recorded as the evaluation point "selected". Training is unchanged.
    select_on_validation: bool = False
    # Builds each server model h_k (from the sample shape, M and a seed). The experiment layer
    # and `simulate` give one built from the server_* settings (experiment/server_models.py);
    # the algorithm itself never builds a model.
    server_learner: ServerLearnerFactory | None = None
    # Measurement hook set by the experiment layer (which knows U's labels; the algorithm
    # never does): called per trained cluster with (members, f̄_k(U), h_k(U), the members'
    # f_i(U)); what it returns is recorded under `public_probe`. Not part of the protocol.
    public_probe: PublicProbe | None = None

    # server state
    assignment: dict[int, int] = field(default_factory=dict, init=False)
    cluster_models: dict[int, Learner] = field(default_factory=dict, init=False)
    threshold_used: float | None = field(default=None, init=False)
    join_threshold: float | None = field(default=None, init=False)
    # Clients that have finished local training once (they get E0 epochs until they have).
    pretrained: set[int] = field(default_factory=set, init=False)
    # While some client has never answered: each client's latest pseudo-labels, to place
    # newcomers next to clustered clients absent in their round.
    _last_probs: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    _pending_models: dict[int, Any] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()  # parameter_constraints
        if self.threshold is not None and self.target_clusters is not None:
            raise ValueError(
                "COSMOS takes exactly one of threshold (B0) and target_clusters; "
                f"got threshold={self.threshold}, target_clusters={self.target_clusters}"
            )
        if self.threshold_rule == "auto":
            given = self.threshold is not None or self.target_clusters is not None
            greedy = self.clustering == "greedy"
            self.threshold_rule = "target" if given or greedy else "silhouette"
        if self.threshold_rule != "target" and (
            self.threshold is not None or self.target_clusters is not None
        ):
            raise ValueError(
                f"threshold_rule {self.threshold_rule!r} chooses B0 (and K) from the distances: "
                "set threshold and target_clusters to null (e.g. algorithm.target_clusters=null)"
            )
        if (
            self.threshold is None
            and self.target_clusters is None
            and self.threshold_rule == "target"
        ):
            self.target_clusters = 5
        if self.server_learner is None and self.server_model not in (*model_names(), "auto"):
            raise ValueError(
                f"server_model {self.server_model!r} is not a registered model; "
                f"allowed: auto (mlp for feature vectors, cnn for images), "
                f"{', '.join(model_names())}"
            )
        if self.distance_backend == "numba" and not l1_kernel.available():
            raise ValueError(
                "distance_backend 'numba' needs numba: pip install 'cosmosfl[fast]' "
                "(or distance_backend: auto, which falls back to torch)"
            )
        codecs.check_codec(self.codec)

    # -- the round ---------------------------------------------------------------------------
    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        self._restore_models(fed)
        with fed.phase("local_training"):
            trained = train_local_with_pretraining(fed, self.pretrained, self.epochs_for)
        with fed.phase("prediction"):
            ask = PredictPublic(codec=self.codec)
            replies = fed.send(dict.fromkeys(fed.client_ids, ask))
            probs = {cid: np.asarray(r.arrays["probs"]) for cid, r in replies.items()}
            if deferred(trained):  # Flower: the prediction carried the training replies
                self.pretrained.update(trained)  # resolved by now: no extra round trip
        with fed.phase("evaluation"):
            own_test = evaluate_clients(fed)
            record.add_metrics("local", own_test)  # f_i^(t,1)
        if not probs:
            raise RuntimeError(f"round {round_num}: no client returned pseudo-labels")

        with fed.phase("clustering"):  # π: round 1 (or every round), else late joiners
            self._update_membership(probs, fed, round_num)

        with fed.phase("server_distillation"):
            teachers, server_losses, h_public = self._train_cluster_models(fed, probs)
        with fed.phase("evaluation"):
            models = {cid: self.cluster_models[k] for cid, k in self.assignment.items()}
            h_test = fed.evaluate_server_models(models)
            record.add_metrics("cluster_model", h_test)  # h_π(i)
            if self.select_on_validation:
                selected = select_on_validation(fed, models, h_test, own_test)
                record.add_metrics("selected", selected)
                record.add_info("selection", selected)  # per client: which model it kept

        with fed.phase("client_distillation"):
            # T acts on every distillation target (PAPER_NOTES): here h_k(U) sent to clients.
            targets = {k: apply_temperature(p, self.temperature) for k, p in h_public.items()}
            if self.client_targets == "teacher":  # diagnostic: skip the server model
                targets.update(teachers)
            # One request per cluster, shared by its members: its targets are encoded once.
            requests = {
                k: Distill(
                    np.asarray(t, dtype=np.float32),
                    epochs=self.distill_epochs,
                    lam=self.lam,
                    client_weights=self.client_weights,
                    codec=self.codec,
                )
                for k, t in targets.items()
            }
            distilled = fed.send({cid: requests[k] for cid, k in self.assignment.items()})
            # KL and r_B of each client's distillation (first and last epoch): does f_i fit h_k?
            record.add_info("client_distill", reply_metrics(distilled))
        with fed.phase("evaluation"):
            record.add_metrics("client_model", evaluate_clients(fed))  # f_i^(t,2)

        record.info.update(
            clusters={int(c): int(k) for c, k in sorted(self.assignment.items())},
            K=len(self.cluster_models),
            threshold=self.threshold_used,
            updated_clusters=sorted(teachers),
            # KL(f̄_k ‖ h_k) and r_B of each cluster model's training: does h_k fit its teacher?
            server_distill={int(k): v for k, v in sorted(server_losses.items())},
        )
        if self.public_probe is not None:
            record.info["public_probe"] = {
                int(k): self.public_probe(
                    members, teachers[k], h_public[k], [probs[c] for c in members if c in probs]
                )
                for k, members in iter_clusters(self.assignment)
                if k in teachers
            }
        return record

    # -- checkpoints -------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        if self._pending_models is not None:  # restored but not yet rebuilt: pass it on
            models = dict(self._pending_models)
        else:
            models = {k: h.get_state() for k, h in self.cluster_models.items()}
        return {
            "assignment": dict(self.assignment),
            "threshold_used": self.threshold_used,
            "join_threshold": self.join_threshold,
            "cluster_models": models,
            "pretrained": sorted(self.pretrained),
            "last_probs": dict(self._last_probs),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.assignment = {int(c): int(k) for c, k in state["assignment"].items()}
        self.threshold_used = state["threshold_used"]
        self.join_threshold = state.get("join_threshold")
        # Checkpoints from before these keys existed: every clustered client had pre-trained.
        self.pretrained = set(state.get("pretrained", self.assignment))
        self._last_probs = {int(c): np.asarray(p) for c, p in state.get("last_probs", {}).items()}
        # Server models need the federation (input shape, classes, device) to be rebuilt:
        # that happens at the start of the next round.
        self._pending_models = {int(k): v for k, v in state["cluster_models"].items()}
        self.cluster_models = {}

    def _restore_models(self, fed: Federation) -> None:
        if self._pending_models is None:
            return
        for k, model_state in sorted(self._pending_models.items()):
            self.cluster_models[k] = self._new_server_model(fed, k)
            self.cluster_models[k].set_state(model_state)
        self._pending_models = None

    def _new_server_model(self, fed: Federation, k: int) -> Learner:
        factory = self.server_learner
        if factory is None:
            raise ValueError(
                "COSMOS has no server_learner to build its cluster models with: "
                "cosmosfl.simulate and run_experiment provide one from the server_* settings; "
                "when driving an engine yourself, pass server_learner="
                "torch_server_learner(...) (the experiment layer's) or a factory of your own"
            )
        return factory(
            tuple(fed.public_x.shape[1:]),
            fed.num_classes,
            derive_seed(fed.seed, "cosmos-server", k),
        )

    def _train_cluster_models(
        self, fed: Federation, probs: dict[int, np.ndarray]
    ) -> tuple[dict[int, np.ndarray], dict[int, dict[str, float]], dict[int, np.ndarray]]:
        """Train each h_k on its cluster's new teacher f̄_k; returns the teachers and losses of
        the clusters trained (a cluster none of whose members answered keeps its model) and
        every h_k(U). The K trainings are independent (same U, own teacher, own seeded
        model), so the engine may run them in its worker processes (`map_public`)."""
        teachers = {}
        for k, members in iter_clusters(self.assignment):
            answered = [probs[c] for c in members if c in probs]
            if not answered:
                fed.log(f"cluster {k}: no member answered; its model keeps last round's state")
                continue
            teachers[k] = apply_temperature(
                aggregate(answered, self.aggregation, trim_fraction=self.trim_fraction),
                self.temperature,
            )
        jobs = [
            (self.cluster_models[k], t, self.server_epochs, self.lam) for k, t in teachers.items()
        ]
        losses, trained_public = {}, {}
        for k, (model, stats, h_u) in zip(
            teachers, map_public(fed, _distill_cluster_model, jobs), strict=True
        ):
            self.cluster_models[k] = model  # the trained h_k (a copy when it came from a worker)
            losses[k] = stats
            trained_public[k] = h_u
        h_public = {
            k: trained_public[k] if k in trained_public else h.predict_proba(fed.public_x)
            for k, h in self.cluster_models.items()
        }
        return teachers, losses, h_public


def _distill_cluster_model(
    public_x: np.ndarray, job: tuple[Learner, np.ndarray, int, float]
) -> tuple[Learner, dict[str, float], np.ndarray]:
    """Step (3) for one cluster: h_k trained on U towards its teacher f̄_k (KL + λ·r_B);
    returns h_k, its losses and h_k(U). Module-level: it may run in a worker process."""
    model, teacher, epochs, lam = job
    stats = model.distill(public_x, teacher, epochs=epochs, lam=lam)
    return model, {name: float(v) for name, v in stats.items()}, model.predict_proba(public_x)
