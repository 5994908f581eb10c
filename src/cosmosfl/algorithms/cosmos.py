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
    reply_metrics,
    train_local_with_pretraining,
)
from cosmosfl.algorithms.selection import select_on_validation
from cosmosfl.core import codecs, l1_kernel, linkage
from cosmosfl.core import protocol as P
from cosmosfl.core.aggregation import AGGREGATIONS, aggregate, apply_temperature
from cosmosfl.core.cluster_choice import CLUSTERINGS, choose_clusters
from cosmosfl.core.clustering import (
    DISTANCE_BACKENDS,
    DISTANCES,
    THRESHOLD_RULES,
    THRESHOLD_SEARCHES,
    assignment_from_clusters,
    greedy_clustering,
    pairwise_distances,
)
from cosmosfl.core.seeds import derive_seed
from cosmosfl.learners.base import Learner
from cosmosfl.models.init import HEAD_INITS
from cosmosfl.models.registry import model_names

PublicProbe = Callable[[list[int], np.ndarray, np.ndarray, list[np.ndarray]], dict[str, float]]
CLIENT_TARGETS = ("cluster_model", "teacher")


@dataclass
class Cosmos(Algorithm):
    """COSMOS with the paper's defaults (PAPER_NOTES.md), except the server model size."""

    name: ClassVar[str] = "cosmos"
    primary_model: ClassVar[str] = "cluster_model"

    threshold: float | None = None  # B0 of Algorithm 1; K is then an output
    # Instead of B0: the smallest B0 giving at most this many clusters. With neither set,
    # target_clusters = 5, the paper's tuning goal (B0 tuned so that K is about 5).
    target_clusters: int | None = None
    # How B0 is chosen when `threshold` is not fixed: "target" (the smallest B0 giving
    # K <= target_clusters), or "largest-gap" / "widest-interval", which choose K from the
    # distances alone (core/clustering.py; target_clusters must then be null).
    threshold_rule: str = "target"
    # How clients are clustered at that B0: "greedy" (Algorithm 1, the paper) or
    # "average-linkage" (an extension: a dendrogram cut at B0, robust to single noisy
    # distances; core/linkage.py). With threshold_rule "silhouette" K is chosen by the
    # partition's silhouette, for either method.
    clustering: str = "greedy"
    distance: str = "l1"
    aggregation: str = "mean"
    trim_fraction: float = 0.2
    temperature: float = 1.0
    lam: float = 5.0  # λ, weight of the consistency regulariser r_B
    pretrain_epochs: int = 5  # E0
    local_epochs: int = 5
    server_epochs: int = 5
    distill_epochs: int = 5
    recluster: bool = False
    client_weights: str = "uniform"  # w_i(x) = 1 (paper) or "label-prior"
    server_model: str = "cnn"
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
        if self.threshold is not None and self.target_clusters is not None:
            raise ValueError(
                "COSMOS takes exactly one of threshold (B0) and target_clusters; "
                f"got threshold={self.threshold}, target_clusters={self.target_clusters}"
            )
        _choice("threshold_rule", self.threshold_rule, THRESHOLD_RULES)
        _choice("clustering", self.clustering, CLUSTERINGS)
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
        _choice("server_head_init", self.server_head_init, HEAD_INITS)
        _choice("client_targets", self.client_targets, CLIENT_TARGETS)
        if self.server_learner is None and self.server_model not in model_names():
            raise ValueError(
                f"server_model {self.server_model!r} is not a registered model; "
                f"allowed: {', '.join(model_names())}"
            )
        if self.server_width <= 0 or self.server_lr <= 0 or self.server_batch_size < 1:
            raise ValueError(
                "server_width and server_lr must be > 0 and server_batch_size >= 1; got "
                f"{self.server_width}, {self.server_lr}, {self.server_batch_size}"
            )
        if self.threshold is not None and not self.threshold >= 0:
            raise ValueError(f"threshold must be >= 0, got {self.threshold}")
        if self.target_clusters is not None and self.target_clusters < 1:
            raise ValueError(f"target_clusters must be >= 1, got {self.target_clusters}")
        _choice("distance", self.distance, DISTANCES)
        _choice("aggregation", self.aggregation, AGGREGATIONS)
        _choice("client_weights", self.client_weights, P.CLIENT_WEIGHTS)
        _choice("threshold_search", self.threshold_search, THRESHOLD_SEARCHES)
        _choice("distance_backend", self.distance_backend, DISTANCE_BACKENDS)
        if self.distance_backend == "numba" and not l1_kernel.available():
            raise ValueError(
                "distance_backend 'numba' needs numba: pip install 'cosmosfl[fast]' "
                "(or distance_backend: auto, which falls back to torch)"
            )
        codecs.check_codec(self.codec)
        if self.distance_sample is not None and self.distance_sample < 1:
            raise ValueError(
                f"distance_sample must be >= 1 or None (exact), got {self.distance_sample}"
            )
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = hard labels), got {self.temperature}")
        if self.lam < 0:
            raise ValueError(f"lam (λ) must be >= 0, got {self.lam}")
        for name in ("pretrain_epochs", "local_epochs", "server_epochs", "distill_epochs"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    # -- the round ---------------------------------------------------------------------------
    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        self._restore_models(fed)
        with fed.phase("local_training"):
            trained = train_local_with_pretraining(
                fed, self.pretrained, self.pretrain_epochs, self.local_epochs
            )
        with fed.phase("prediction"):
            ask = {"codec": self.codec} if self.codec != "float32" else {}
            replies = fed.send({cid: P.Message(P.PREDICT_PUBLIC, ask) for cid in fed.client_ids})
            probs = {cid: np.asarray(r.arrays["probs"]) for cid, r in replies.items()}
            if deferred(trained):  # Flower: answering this task means training finished
                self.pretrained.update(probs)
        with fed.phase("evaluation"):
            own_test = evaluate_clients(fed)
            record.add_metrics("local", own_test)  # f_i^(t,1)
        if not probs:
            raise RuntimeError(f"round {round_num}: no client returned pseudo-labels")

        with fed.phase("clustering"):
            seen = {**self._last_probs, **probs}
            if round_num == 1 or self.recluster or not self.assignment:
                self._cluster(probs, fed)
            elif set(probs) - set(self.assignment) and self._uninformative():
                # Round 1 had no more answers than target_clusters: every client is a
                # singleton and B0 says nothing yet, so cluster everyone seen so far.
                self._cluster(seen, fed)
            else:
                self._place_newcomers(probs, fed)
            if self.recluster or set(self.assignment) >= set(fed.client_ids):
                self._last_probs = {}  # every client placed: the clustering is final
            else:
                self._last_probs = seen

        with fed.phase("server_distillation"):
            teachers, server_losses = self._train_cluster_models(fed, probs)
            h_public = {k: h.predict_proba(fed.public_x) for k, h in self.cluster_models.items()}
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
            config = {
                "epochs": self.distill_epochs,
                "lam": self.lam,
                "client_weights": self.client_weights,
            }
            # Encoded once per cluster, shared by its members' messages (not one copy each).
            encoded = {k: codecs.encode_probs(t, self.codec, "targets") for k, t in targets.items()}
            distilled = fed.send(
                {
                    cid: P.Message(P.DISTILL, config, dict(encoded[k]))
                    for cid, k in self.assignment.items()
                }
            )
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

    # -- steps -------------------------------------------------------------------------------
    def _cluster(self, probs: dict[int, np.ndarray], fed: Federation) -> None:
        ids = sorted(probs)
        d = self._distances([probs[c] for c in ids], fed)
        # How close a newcomer must be to join: Algorithm 1's B0 when the user fixed it; with a
        # searched B0 (the smallest for K, right at a within-group distance) the end of the
        # interval of thresholds giving these clusters. Only needed while some client is
        # missing from the clustering.
        missing = (
            self.threshold is None and not self.recluster and not set(ids) >= set(fed.client_ids)
        )
        chosen = choose_clusters(
            d,
            self.clustering,
            self.threshold_rule,
            threshold=self.threshold,
            target=self.target_clusters,
            search=self.threshold_search,
            need_join=missing,
        )
        clusters, b0 = chosen.clusters, chosen.threshold
        pi = assignment_from_clusters(clusters, len(ids))
        old_assignment, old_models = self.assignment, self.cluster_models
        self.assignment = {cid: int(pi[i]) for i, cid in enumerate(ids)}
        self.threshold_used = b0
        self.join_threshold = chosen.join if chosen.join is not None else b0
        self.cluster_models = {}
        for k, members in iter_clusters(self.assignment):
            self.cluster_models[k] = self._new_server_model(fed, k)
            # Re-clustering: a new cluster inherits the model most of its members came from.
            previous = [old_assignment[c] for c in members if c in old_assignment]
            if previous:
                source = max(sorted(set(previous)), key=previous.count)
                self.cluster_models[k].set_state(
                    _inherit(old_models[source].get_state(), self.cluster_models[k].get_state())
                )
        fed.log(
            f"clustering: K={len(clusters)} with B0={b0:.4f} ({self.clustering}, "
            f"{self.distance} distance)"
        )

    def _distances(self, labels: list[np.ndarray], fed: Federation) -> np.ndarray:
        """The clustering's distances between these pseudo-label matrices (same settings and
        row sample for the round-1 clustering and for placing newcomers)."""
        return pairwise_distances(
            labels,
            self.distance,
            sample=self.distance_sample,
            seed=derive_seed(fed.seed, "cosmos-distance-sample") % 2**32,
            backend=self.distance_backend,
        )

    def _uninformative(self) -> bool:
        """A searched clustering in which every client is alone (B0 = 0 or K = 1 client)."""
        return self.threshold is None and len(self.cluster_models) >= len(self.assignment)

    def _place_newcomers(self, probs: dict[int, np.ndarray], fed: Federation) -> None:
        """Clients answering for the first time (they missed the clustering) join by Algorithm
        1's own criterion: the cluster of their nearest clustered client if that client is
        B0-close (labels of this round, or the last ones it sent); newcomers close to nobody
        are clustered among themselves with the same B0 into new clusters. With average
        linkage, "close" is the mean distance to a cluster's members. Existing clusters and
        their models are left alone."""
        newcomers = sorted(c for c in probs if c not in self.assignment)
        if not newcomers:
            return
        b0 = float(self.threshold_used)  # type: ignore[arg-type]
        join = self.join_threshold if self.join_threshold is not None else b0
        latest = {**self._last_probs, **probs}
        known = sorted(c for c in self.assignment if c in latest)
        ids = known + newcomers
        d = self._distances([latest[c] for c in ids], fed)
        lonely = []
        if self.clustering == "average-linkage":
            # Average linkage's own criterion: the mean distance to a cluster's members.
            lonely = self._join_by_mean(d, known, newcomers, b0, join)
        else:
            for i, cid in enumerate(newcomers, start=len(known)):
                j = int(np.argmin(d[i, : len(known)])) if known else -1
                if j >= 0 and (d[i, j] <= b0 or d[i, j] < join):
                    self.assignment[cid] = self.assignment[known[j]]
                else:
                    lonely.append(i)
        if lonely and self.clustering == "average-linkage":
            sub = d[np.ix_(lonely, lonely)]
            groups = linkage.cut_at(linkage.average_linkage(sub), len(lonely), b0)
            self._new_clusters(fed, [[ids[lonely[m]] for m in g] for g in groups])
        elif lonely:
            sub = d[np.ix_(lonely, lonely)]
            # The same closeness as for joining: d <= B0 or d < join.
            below = sub[sub < join]
            thr = max(b0, float(below.max())) if below.size else b0
            groups = greedy_clustering(sub, thr)
            self._new_clusters(fed, [[ids[lonely[m]] for m in g] for g in groups])
        fed.log(
            f"clustering: {len(newcomers)} newcomer(s) placed, {len(lonely)} in new clusters "
            f"(K={len(self.cluster_models)})"
        )

    def _join_by_mean(
        self, d: np.ndarray, known: list[int], newcomers: list[int], b0: float, join: float
    ) -> list[int]:
        """Place newcomers (rows after `known` in d) in the cluster of smallest mean distance if
        it is within the cut; returns the rows of those placed nowhere."""
        lonely = []
        members: dict[int, list[int]] = {}
        for j, cid in enumerate(known):
            members.setdefault(self.assignment[cid], []).append(j)
        for i, cid in enumerate(newcomers, start=len(known)):
            means = {k: float(d[i, rows].mean()) for k, rows in sorted(members.items())}
            k = min(means, key=means.__getitem__) if means else None
            if k is not None and (means[k] <= b0 or means[k] < join):
                self.assignment[cid] = k
            else:
                lonely.append(i)
        return lonely

    def _new_clusters(self, fed: Federation, groups: list[list[int]]) -> None:
        next_k = max(self.cluster_models, default=-1) + 1
        for n, group in enumerate(groups):
            for cid in group:
                self.assignment[cid] = next_k + n
            self.cluster_models[next_k + n] = self._new_server_model(fed, next_k + n)

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
    ) -> tuple[dict[int, np.ndarray], dict[int, dict[str, float]]]:
        """Train each h_k on its cluster's new teacher f̄_k; returns the teachers and losses of
        the clusters trained (a cluster none of whose members answered keeps its model)."""
        teachers, losses = {}, {}
        for k, members in iter_clusters(self.assignment):
            answered = [probs[c] for c in members if c in probs]
            if not answered:
                fed.log(f"cluster {k}: no member answered; its model keeps last round's state")
                continue
            teacher = apply_temperature(
                aggregate(answered, self.aggregation, trim_fraction=self.trim_fraction),
                self.temperature,
            )
            stats = self.cluster_models[k].distill(
                fed.public_x, teacher, epochs=self.server_epochs, lam=self.lam
            )
            losses[k] = {name: float(v) for name, v in stats.items()}
            teachers[k] = teacher
        return teachers, losses


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} {value!r} is not supported; allowed: {', '.join(allowed)}")


def _inherit(source: object, own: object) -> object:
    """The source model's weights with the new model's own RNG state (TorchLearner states),
    so that clusters inheriting one model do not shuffle and augment in lockstep."""
    if isinstance(source, dict) and isinstance(own, dict) and "generator" in own:
        return {**source, "generator": own["generator"]}
    return source
