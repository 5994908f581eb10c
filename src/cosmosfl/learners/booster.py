"""BoosterLearner: what XGBoostLearner and LightGBMLearner (learners/boosting.py) share.

Both train through the native APIs (`xgboost.train`, `lightgbm.train`) over all M classes, so a
client missing classes needs no label re-encoding: by default with the soft-label softmax
objective (learners/softmax_objective.py) on the unique rows, or (`soft_targets="copies"`) with
the built-in multiclass objective on weighted copies. The libraries are optional extras,
imported only when a learner is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from cosmosfl.core.constraints import Constraint, Custom, Interval, Options, Rule
from cosmosfl.learners.refit import DIVERGENCE_TOLERANCE, MIN_TARGET_MASS, RefitLearner
from cosmosfl.learners.softmax_objective import SoftmaxObjective, log_prior, softmax
from cosmosfl.learners.training_rows import TrainingRows

SOFT_TARGETS = ("objective", "copies")


def require_library(module: str, learner: str, extra: str) -> Any:
    """The module `module`, or an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{learner} needs {module}: pip install 'cosmosfl[{extra}]'") from err


class SoftBooster:
    """A booster trained with the soft-label objective and the starting scores `base` (M,)
    that its raw scores are offset by (the library's booster alone predicts raw scores)."""

    def __init__(self, booster: Any, base: np.ndarray) -> None:
        self.booster = booster
        self.base = np.asarray(base, np.float64)


class BoosterLearner(RefitLearner):
    """Shared by both boosters: soft targets on the unique rows, continued boosting on the union.

    Soft targets (`soft_targets="objective"`, the default): every row trains once, with its
    soft target (one-hot for private rows) and weight (× `public_weight` for public rows),
    through a custom softmax objective whose gradient is w (p − t) and Hessian w p (1 − p)
    per class (scaled as the library's built-in multiclass objective scales it), starting from
    the log of the weighted class frequencies as the built-in objective does. These are the
    statistics the built-in objective computes on the weighted copies of the copies route, so
    the model learns the same soft-label cross-entropy from N rows instead of up to N × M
    copies (no copy is dropped for low mass). What still differs from the copies route: the
    histogram bins are built from N rows instead of the copies, and LightGBM's
    `min_data_in_leaf` counts rows, not copies. `soft_targets="copies"` keeps the earlier
    route: one copy per class with weight target[c] × weight × `public_weight` (copies under
    `min_target_mass` dropped) and the built-in objective.

    Keeping what was learned: every `fit` and `distill` grows `num_trees` trees from scratch on
    the private data plus the latest distilled targets (remembered, as SklearnLearner does), so
    both stay in the objective and a later `fit` cannot boost the distilled knowledge away.
    Continuing the current model instead (`continue_boosting=True`: `trees_per_call` more trees
    from it via `xgb_model=` / `init_model=`, rebuilt from scratch past `max_trees`) is cheaper
    per call but gains less: after a fit the model is confident on the private rows, its
    softmax Hessians p(1-p) near the public rows are ~0, and Newton steps then either cannot
    split there (xgboost's min_child_weight: the targets were barely learned) or take huge
    steps (lightgbm: private accuracy 1.0 -> 0.17 on a small test problem, which the
    divergence guard rejects). `epochs` is ignored. One thread and a fixed seed by default:
    clients run side by side, and the result is then deterministic.

    Divergence: checked as in SklearnLearner (private accuracy more than `divergence_tolerance`
    below max(previous model, majority class) while failing its own training rows, or
    non-finite probabilities); such a call is retried with the learning rate halved (at most
    `max_retries` times), else rejected (the previous model stays); a UserWarning and the
    metrics `refit_retries` / `refit_rejected` report it.
    """

    _LIBRARY = ""  # the module (and the cosmosfl extra) the learner trains with
    _LR_KEYS: tuple[str, ...] = ("learning_rate",)
    _DEFAULT_LR = 0.1
    parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "params": Custom(
            lambda p: p is None or isinstance(p, Mapping),
            "use a dict of the library's native parameters, or None",
        ),
        "num_trees": Interval(int, 1),
        "trees_per_call": Interval(int, 1),
        "max_trees": Interval(int, 1),
        "continue_boosting": Custom(lambda v: isinstance(v, bool), "use True or False"),
        "threads": Interval(int, 1),
        "soft_targets": Options(SOFT_TARGETS),
    }
    parameter_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            lambda p: p.max_trees >= p.num_trees,
            lambda p: f"max_trees ({p.max_trees}) must be >= num_trees ({p.num_trees})",
        ),
    )

    def __init__(
        self,
        *,
        num_classes: int,
        params: dict[str, Any] | None = None,
        num_trees: int = 100,
        trees_per_call: int = 20,
        max_trees: int = 1000,
        continue_boosting: bool = False,
        seed: int = 0,
        threads: int = 1,
        public_weight: float = 1.0,
        divergence_tolerance: float = DIVERGENCE_TOLERANCE,
        max_retries: int = 3,
        min_target_mass: float = MIN_TARGET_MASS,
        soft_targets: str = "objective",
    ) -> None:
        # The library first, so that a missing extra is named before anything else.
        require_library(self._LIBRARY, type(self).__name__, self._LIBRARY)
        super().__init__(
            num_classes=num_classes,
            public_weight=public_weight,
            divergence_tolerance=divergence_tolerance,
            max_retries=max_retries,
            min_target_mass=min_target_mass,
        )
        self.soft_targets = soft_targets
        self.params = params
        self.num_trees = num_trees
        self.trees_per_call = trees_per_call
        self.max_trees = max_trees
        self.continue_boosting = continue_boosting
        self.seed = seed
        self.threads = threads

    def _native_params(self) -> dict[str, Any]:
        return dict(self.params or {})

    def _lr(self) -> tuple[str, float]:
        for key in self._LR_KEYS:
            if self._native_params().get(key) is not None:
                return key, float(self._native_params()[key])
        return self._LR_KEYS[0], self._DEFAULT_LR

    def _without_lr(self) -> dict[str, Any]:
        """`params` less every name of the learning rate (the learner sets it, scaled)."""
        return {k: v for k, v in self._native_params().items() if k not in self._LR_KEYS}

    def _rounds(self, init: Any) -> tuple[int, Any]:
        """(trees to grow, model to continue from or None)."""
        if (
            not self.continue_boosting
            or init is None
            or self._num_rounds(init) + self.trees_per_call > self.max_trees
        ):
            return self.num_trees, None
        return self.trees_per_call, init

    def _num_rounds(self, model: Any) -> int:
        raise NotImplementedError

    # -- the soft-label objective ----------------------------------------------------------------
    _HESSIAN_FLOOR = 0.0

    def _hessian_factor(self) -> float:
        raise NotImplementedError

    def _objective(self, rows: TrainingRows, base: np.ndarray) -> SoftmaxObjective:
        return SoftmaxObjective(
            rows.targets,
            rows.weights,
            base,
            hessian_factor=self._hessian_factor(),
            hessian_floor=self._HESSIAN_FLOOR,
        )

    def _train_rows(self, rows: TrainingRows, *, lr_scale: float, init: Any) -> Any:
        if self.soft_targets == "copies":
            return super()._train_rows(rows, lr_scale=lr_scale, init=init)
        # A model of the copies route (an old checkpoint) cannot be continued here.
        start = init if isinstance(init, SoftBooster) else None
        rounds, start = self._rounds(start)
        base = start.base if start is not None else log_prior(rows.targets, rows.weights)
        booster = self._train_soft(
            rows,
            self._objective(rows, base),
            rounds,
            lr_scale,
            None if start is None else start.booster,
        )
        return SoftBooster(booster, base)

    def _train_soft(
        self,
        rows: TrainingRows,
        objective: SoftmaxObjective,
        rounds: int,
        lr_scale: float,
        start: Any,
    ) -> Any:
        """A booster grown `rounds` trees on the unique rows with `objective` (from `start`)."""
        raise NotImplementedError

    def _raw(self, booster: Any, x: np.ndarray) -> np.ndarray:
        """(n, M) raw scores of a booster trained with the custom objective."""
        raise NotImplementedError

    def _builtin_proba(self, booster: Any, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _proba(self, model: Any, x: np.ndarray) -> np.ndarray:
        if isinstance(model, SoftBooster):
            raw = np.asarray(self._raw(model.booster, x), np.float64).reshape(len(x), -1)
            return softmax(raw + model.base)
        return self._builtin_proba(model, x)

    # -- reuse and work ----------------------------------------------------------------------
    def _deterministic(self) -> bool:
        # Grown from scratch with a fixed seed and deterministic settings, the same rows give
        # the same trees; a continued model depends on the one it continues.
        return not self.continue_boosting

    def _settings(self) -> Any:
        return (
            repr(sorted(self._native_params().items())),
            self.num_trees,
            self.trees_per_call,
            self.max_trees,
            self.continue_boosting,
            self.seed,
            self.threads,
            self.soft_targets,
        )

    def _trained_rows(self, rows: TrainingRows) -> int:
        return len(rows.x) if self.soft_targets == "objective" else len(rows.y)

    def refit_work(self, private_rows: int, public_rows: int, features: int) -> float:
        if self.soft_targets == "copies":
            return super().refit_work(private_rows, public_rows, features)
        # One tree per class per boosting round on every row.
        return float((private_rows + public_rows) * self.num_classes * features)

    # -- checkpoints -------------------------------------------------------------------------
    def _booster_state(self, booster: Any) -> Any:
        raise NotImplementedError

    def _load_booster(self, state: Any) -> Any:
        raise NotImplementedError

    def _model_state(self, model: Any) -> Any:
        if isinstance(model, SoftBooster):
            return {"booster": self._booster_state(model.booster), "base": model.base.tolist()}
        return self._booster_state(model)

    def _load_model(self, state: Any) -> Any:
        if isinstance(state, dict):
            return SoftBooster(self._load_booster(state["booster"]), np.asarray(state["base"]))
        return self._load_booster(state)  # the copies route (and checkpoints before it)
