"""COSMOS's settings, grouped as the paper's (section 4), extensions, performance, and
diagnostics / hooks; `Cosmos` (cosmos.py) inherits them and runs the round.

The field order is the order of `algorithm:` in a dumped config. Where the paper is silent, the
values are those of docs/cosmos.md ("Choices where the paper is silent").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import FrozenInstanceError, InitVar, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from cosmosfl.algorithms.base import ServerLearnerFactory
from cosmosfl.algorithms.cosmos_server import SERVER_TRAININGS
from cosmosfl.algorithms.hyperparameters import CONSISTENCY_WEIGHT, EPOCHS, TEACHER, EpochSchedule
from cosmosfl.core import codecs, l1_kernel, protocol
from cosmosfl.core.cluster_choice import CLUSTERINGS
from cosmosfl.core.clustering import (
    DISTANCE_BACKENDS,
    DISTANCES,
    THRESHOLD_RULES,
    THRESHOLD_SEARCHES,
)
from cosmosfl.core.constraints import Interval, Options
from cosmosfl.models.init import HEAD_INITS
from cosmosfl.models.registry import model_names

PublicProbe = Callable[[list[int], np.ndarray, np.ndarray, list[np.ndarray]], dict[str, float]]
CLIENT_TARGETS = ("cluster_model", "teacher")
# "validated" (the default since 0.4): h_k trained by held-out fidelity to f̄_k, clients keep a
# distillation step only when it does not hurt on their validation slice, and the reported
# model is what each client deploys. "paper": section 4 as written (fixed server epochs, every
# step accepted, h_π(i) reported). docs/cosmos.md, "What a site gets".
RECIPES = ("validated", "paper")
# What a client does with a distillation step: "validation" keeps it only when it does not hurt
# on the client's validation slice (handlers/gate.py); "none" keeps every step (the paper).
CLIENT_GATES = ("validation", "none")
DEPLOYS = ("own", "mix")
# The candidate teachers a gated client may choose between: h_k(U) alone, or h_k(U) and f̄_k(U).
GATE_TEACHERS = ("cluster_model", "both")
# The two hooks among the fields: the experiment layer hands them in after construction (it
# builds the server-model factory on the run's device; the privacy audit unplugs the probe).
# They are injected code, not settings, so they stay assignable.
HOOKS = frozenset({"server_learner", "public_probe"})


@dataclass
class CosmosSettings(EpochSchedule):
    """COSMOS's hyperparameters and their checks. The paper's names: E0 `pretrain_epochs`,
    E `local_epochs`, B0 `b0`, λ `lam`, T `temperature`, w_i(x) `client_weights`.

    Settings are kept as given and fixed once built: assigning one raises
    `FrozenInstanceError` (build another: `Cosmos(**{**algo.hyperparameters(), "lam": 0})`).
    What an "auto" or an unset value stands for is a `*_used` property, derived when read.
    """

    # Defaults that changed, with what a config that does not set them gets told (show-config
    # and every run's header), so a run that relied on the old default does not change silently.
    changed_defaults: ClassVar[dict[str, str]] = {
        "recipe": (
            "COSMOS's default recipe is 'validated' since cosmosfl 0.4: server models trained "
            "until their held-out fidelity to the cluster teacher stops improving, clients "
            "keep a distillation step only when it does not hurt on their validation slice, "
            "and the reported model is what each client deploys; set algorithm.recipe: paper "
            "for the paper's protocol (docs/cosmos.md, 'What a site gets')"
        ),
        "clustering": (
            "COSMOS's default clustering is average-linkage with K chosen by the silhouette "
            "since cosmosfl 0.3 (was greedy, the paper's Algorithm 1, with B0 for "
            "target_clusters 5); set algorithm.clustering: greedy for the paper's method"
        ),
    }
    renamed_parameters: ClassVar = {
        "threshold": "b0",
        "threshold_rule": "b0_rule",
        "threshold_search": "b0_search",
    }
    parameter_constraints: ClassVar = {
        "b0": Interval(float, 0, none="chosen by b0_rule", symbol="B0"),
        "target_clusters": Interval(int, 1, none="B0 given or chosen by b0_rule"),
        "b0_rule": Options(("auto", *THRESHOLD_RULES)),
        "clustering": Options(CLUSTERINGS),
        "distance": Options(DISTANCES),
        **TEACHER,
        "lam": CONSISTENCY_WEIGHT,
        "server_epochs": EPOCHS,
        "distill_epochs": EPOCHS,
        "client_weights": Options(protocol.CLIENT_WEIGHTS),
        "server_width": Interval(float, 0, closed="neither"),
        "server_batch_size": Interval(int, 1),
        "server_lr": Interval(float, 0, closed="neither", none="by recipe"),
        "server_head_init": Options(HEAD_INITS),
        "distance_sample": Interval(int, 1, none="exact, all of U"),
        "distance_backend": Options(DISTANCE_BACKENDS),
        "b0_search": Options(THRESHOLD_SEARCHES),
        "client_targets": Options(CLIENT_TARGETS),
        "recipe": Options(RECIPES),
        "server_training": Options(("auto", *SERVER_TRAININGS)),
        "server_holdout": Interval(float, 0, 1, closed="neither", noun="a fraction"),
        "server_max_epochs": Interval(int, 1),
        "server_patience": Interval(int, 0),
        "client_gate": Options(("auto", *CLIENT_GATES)),
        "gate_margin": Interval(float, 0, 1, noun="a fraction"),
        "gate_teachers": Options(GATE_TEACHERS),
        "deploy": Options(DEPLOYS),
    }

    # -- paper (Section 4) ------------------------------------------------------------------
    # E0 (`pretrain_epochs`) and E (`local_epochs`) come first, from EpochSchedule.
    b0: float | None = None  # B0 of Algorithm 1; K is then an output
    # Instead of B0: the smallest B0 giving at most this many clusters (for average linkage:
    # the dendrogram cut into this many). With clustering greedy and neither set, 5 is used
    # (`target_clusters_used`), the paper's tuning goal (B0 tuned so that K is about 5).
    target_clusters: int | None = None
    distance: str = "l1"  # d(i, j): mean ℓ1 over U (the paper's), or l2, l1-chance
    aggregation: str = "mean"  # f̄_k: the mean of the members' f_i(U) (or a robust rule)
    trim_fraction: float = 0.2
    temperature: float = 1.0  # T, on every distillation target
    lam: float = 5.0  # λ, weight of the consistency regulariser r_B
    server_epochs: int = 5
    distill_epochs: int = 5
    client_weights: str = "uniform"  # w_i(x) = 1 (paper) or "label-prior"
    # h_k's architecture from the model registry; "auto": mlp for feature vectors, cnn for
    # images (the paper names VGG16; docs/ablations.md measured cnn, resnet8 and vgg11).
    server_model: str = "auto"
    server_width: float = 1.0
    server_batch_size: int = 32
    # Adam's rate for h_k; null: the recipe's (paper 1e-4; validated: 1e-3 to start, cut by
    # held-out fidelity, so one default fits feature vectors and images alike).
    server_lr: float | None = None
    # Initial weights of h_k's last layer: "kaiming" (the paper's init everywhere, which makes
    # new server models start with large logits) or "default" (PyTorch's Linear init,
    # U(±1/sqrt(fan_in)), zero bias: near-uniform initial predictions).
    server_head_init: str = "kaiming"

    # -- what a site gets (docs/cosmos.md, "What a site gets"; not the paper's method) --------
    recipe: str = "validated"
    # How h_k is trained: "fidelity" (until its KL to f̄_k on a held-out `server_holdout` of U
    # stops improving: at most `server_max_epochs`, `server_patience` learning-rate cuts) or
    # "fixed" (`server_epochs` at server_lr, the paper's). "auto": the recipe's.
    server_training: str = "auto"
    server_holdout: float = 0.2
    server_max_epochs: int = 100
    server_patience: int = 2
    # "validation": clients keep a distillation step only when their validation accuracy does
    # not fall by more than `gate_margin` (handlers/gate.py; data.validation_fraction > 0);
    # "none": every step is kept. "auto": the recipe's. `gate_teachers: both` lets each client
    # also try f̄_k(U) (twice the downlink).
    client_gate: str = "auto"
    gate_margin: float = 0.0
    gate_teachers: str = "cluster_model"
    # What each client deploys (evaluation point "deployed"): "own" (its own model after the
    # gate: only soft labels on U crossed the wire) or "mix" (α·f_i + (1 − α)·h_π(i), α chosen
    # on its validation slice; needs h_π(i) at the site, so it is opt-in; in-process only).
    deploy: str = "own"

    # -- extension (not the paper's method) --------------------------------------------------
    # How clients are clustered at B0: "average-linkage" (the default since 0.3: a
    # dendrogram cut, robust to single noisy distances; core/linkage.py) or "greedy" (the
    # paper's Algorithm 1). Chosen from the measured settings (docs/cosmos.md, "Default
    # clustering"): with K by the silhouette it recovered the groups where Algorithm 1 with B0
    # for K = 5 did not (Fashion-MNIST, digits) and matched it where Algorithm 1 was exact.
    clustering: str = "average-linkage"
    # How B0 is chosen when `b0` is not fixed: "target" (at most target_clusters clusters,
    # the paper's tuning), "silhouette" (the partition with the largest silhouette), or
    # "largest-gap" / "widest-interval" (K from the distances alone; core/clustering.py).
    # "auto": "target" for greedy or when b0 / target_clusters is given, else "silhouette"
    # (`b0_rule_used`).
    b0_rule: str = "auto"
    recluster: bool = False  # cluster every round, not only in round 1
    # Each client also measures h_π(i) and its own model f_i^(t,1) on its validation slice
    # (private data held out of training, data.validation_fraction) and keeps the better one
    # (ties: h_π(i)); its test accuracy is recorded as the evaluation point "selected".
    # Training is unchanged.
    select_on_validation: bool = False

    # -- performance (docs/performance.md) ---------------------------------------------------
    # codec: how soft labels travel both ways (float32, float16, uint8, top<k>).
    # distance_sample: estimate distances on this many rows of U (None: exact, all of U).
    # distance_backend: torch, numba (compiled ℓ1 kernel, needs cosmosfl[fast]) or auto
    # (numba for thousands of clients when installed). b0_search: how the B0 for
    # target_clusters is searched.
    codec: str = "float32"
    distance_sample: int | None = None
    distance_backend: str = "auto"
    b0_search: str = "auto"

    # -- diagnostic / hooks ------------------------------------------------------------------
    # Diagnostic: what clients distill from, "cluster_model" (h_k(U), the paper) or "teacher"
    # (the cluster's aggregated pseudo-labels f̄_k(U) directly, as COMET does), everything
    # else equal; it isolates what the server model adds.
    client_targets: str = "cluster_model"
    # Builds each server model h_k (from the sample shape, M and a seed). The experiment layer
    # and `simulate` give one built from the server_* settings (experiment/server_models.py);
    # the algorithm itself never builds a model.
    server_learner: ServerLearnerFactory | None = None
    # Measurement hook set by the experiment layer (which knows U's labels; the algorithm
    # never does): called per trained cluster with (members, f̄_k(U), h_k(U), the members'
    # f_i(U)); what it returns is recorded under `public_probe`. Not part of the protocol.
    public_probe: PublicProbe | None = None

    # Deprecated names (before 0.3) of b0, b0_rule and b0_search.
    threshold: InitVar[float | None] = None
    threshold_rule: InitVar[str | None] = None
    threshold_search: InitVar[str | None] = None

    @property
    def server_training_used(self) -> str:
        """`server_training`, or the recipe's."""
        if self.server_training != "auto":
            return self.server_training
        return "fixed" if self.recipe == "paper" else "fidelity"

    @property
    def client_gate_used(self) -> bool:
        """Whether clients gate their distillation: `client_gate`, or the recipe's."""
        if self.client_gate != "auto":
            return self.client_gate == "validation"
        return self.recipe != "paper"

    @property
    def server_lr_used(self) -> float:
        """`server_lr`, or the recipe's starting rate."""
        if self.server_lr is not None:
            return self.server_lr
        return 1e-4 if self.server_training_used == "fixed" else 1e-3

    @property
    def b0_rule_used(self) -> str:
        """`b0_rule`, or for "auto": "target" with the paper's greedy clustering or when B0 or
        K is given, else "silhouette"."""
        if self.b0_rule != "auto":
            return self.b0_rule
        given = self.b0 is not None or self.target_clusters is not None
        return "target" if given or self.clustering == "greedy" else "silhouette"

    @property
    def target_clusters_used(self) -> int | None:
        """`target_clusters`, or 5 (the paper's tuning goal) when the "target" rule has
        neither B0 nor K to go by."""
        if self.b0 is None and self.target_clusters is None and self.b0_rule_used == "target":
            return 5
        return self.target_clusters

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SETTINGS and self.__dict__.get("_settings_fixed", False):
            raise FrozenInstanceError(
                f"cannot assign to COSMOS setting {name!r}: settings are fixed when the "
                f"algorithm is built; build another with the value you want, e.g. "
                f"Cosmos(**{{**algorithm.hyperparameters(), {name!r}: ...}})"
            )
        super().__setattr__(name, value)

    def __post_init__(
        self, threshold: float | None, threshold_rule: str | None, threshold_search: str | None
    ) -> None:
        self.take_renamed("threshold", threshold)  # type: ignore[attr-defined]
        self.take_renamed("threshold_rule", threshold_rule)  # type: ignore[attr-defined]
        self.take_renamed("threshold_search", threshold_search)  # type: ignore[attr-defined]
        super().__post_init__()  # parameter_constraints
        if self.b0 is not None and self.target_clusters is not None:
            raise ValueError(
                "COSMOS takes exactly one of b0 (B0) and target_clusters; "
                f"got b0={self.b0}, target_clusters={self.target_clusters}"
            )
        if self.b0_rule_used != "target" and (
            self.b0 is not None or self.target_clusters is not None
        ):
            raise ValueError(
                f"b0_rule {self.b0_rule_used!r} chooses B0 (and K) from the distances: "
                "set b0 and target_clusters to null (e.g. algorithm.target_clusters=null)"
            )
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
        object.__setattr__(self, "_settings_fixed", True)


# Every field of CosmosSettings but the hooks: fixed once `__post_init__` has run.
_SETTINGS = frozenset(f.name for f in fields(CosmosSettings)) - HOOKS

__all__ = [
    "CLIENT_GATES",
    "CLIENT_TARGETS",
    "DEPLOYS",
    "GATE_TEACHERS",
    "HOOKS",
    "RECIPES",
    "CosmosSettings",
    "PublicProbe",
]
