"""XGBoostLearner and LightGBMLearner: gradient-boosted trees behind the Learner contract.

Both are optional extras (`pip install 'cosmosfl[xgboost]'` / `'cosmosfl[lightgbm]'`), imported
only when a learner is built. They train through the native APIs (`xgboost.train`,
`lightgbm.train`) over all M classes, so a client missing classes needs no label re-encoding:
by default with the soft-label softmax objective (learners/softmax_objective.py) on the unique
rows, or (`soft_targets="copies"`) with the built-in multiclass objective on weighted copies.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from cosmosfl.learners.refit import DIVERGENCE_TOLERANCE, MIN_TARGET_MASS, RefitLearner
from cosmosfl.learners.softmax_objective import SoftmaxObjective, log_prior, softmax
from cosmosfl.learners.training_rows import TrainingRows

SOFT_TARGETS = ("objective", "copies")


def _require(module: str, learner: str, extra: str) -> Any:
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


class _BoosterLearner(RefitLearner):
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

    _LR_KEYS: tuple[str, ...] = ("learning_rate",)
    _DEFAULT_LR = 0.1

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
        super().__init__(
            num_classes=num_classes,
            public_weight=public_weight,
            divergence_tolerance=divergence_tolerance,
            max_retries=max_retries,
            min_target_mass=min_target_mass,
        )
        if soft_targets not in SOFT_TARGETS:
            raise ValueError(
                f"soft_targets = {soft_targets!r}; allowed: 'objective' (the soft-label softmax "
                "objective on the unique rows) or 'copies' (weighted copies, built-in objective)"
            )
        self.soft_targets = soft_targets
        for name, value in (
            ("num_trees", num_trees),
            ("trees_per_call", trees_per_call),
            ("threads", threads),
        ):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if int(max_trees) < int(num_trees):
            raise ValueError(f"max_trees ({max_trees}) must be >= num_trees ({num_trees})")
        self.params = dict(params or {})
        self.num_trees = int(num_trees)
        self.trees_per_call = int(trees_per_call)
        self.max_trees = int(max_trees)
        self.continue_boosting = bool(continue_boosting)
        self.seed = int(seed)
        self.threads = int(threads)

    def _lr(self) -> tuple[str, float]:
        for key in self._LR_KEYS:
            if self.params.get(key) is not None:
                return key, float(self.params[key])
        return self._LR_KEYS[0], self._DEFAULT_LR

    def _without_lr(self) -> dict[str, Any]:
        """`params` less every name of the learning rate (the learner sets it, scaled)."""
        return {k: v for k, v in self.params.items() if k not in self._LR_KEYS}

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
            repr(sorted(self.params.items())),
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


class XGBoostLearner(_BoosterLearner):
    """XGBoost through `xgboost.train` with `multi:softprob` over all `num_classes` classes.

    `params` are native booster parameters (e.g. {"max_depth": 4, "eta": 0.1}); the objective,
    `num_class`, `nthread` (= `threads`) and `seed` are set by the learner. See _BoosterLearner
    above for soft targets, continued boosting and the divergence guard.
    """

    _LR_KEYS = ("eta", "learning_rate")
    _DEFAULT_LR = 0.3  # xgboost's default eta

    def __init__(self, *, num_classes: int, **options: Any) -> None:
        _require("xgboost", "XGBoostLearner", "xgboost")  # fail early, with the install hint
        super().__init__(num_classes=num_classes, **options)

    @property
    def _xgb(self) -> Any:  # looked up on use: a module attribute would not deepcopy or pickle
        return importlib.import_module("xgboost")

    _HESSIAN_FLOOR = 1e-16  # multi:softprob's floor

    def _hessian_factor(self) -> float:
        return 2.0  # multi:softprob's Hessian is 2 p (1 - p)

    def _native(self, lr_scale: float, *, custom: bool = False) -> dict[str, Any]:
        key, lr = self._lr()
        params = {"verbosity": 0, "tree_method": "hist", **self._without_lr()}
        params.update(
            objective="multi:softprob",
            num_class=self.num_classes,
            nthread=self.threads,
            seed=self.seed,
            **{key: lr * lr_scale},
        )
        if custom:  # the objective is the Python callable; no built-in metric to compute
            del params["objective"]
            params["disable_default_eval_metric"] = 1
        return params

    def _train(
        self, x: np.ndarray, y: np.ndarray, w: np.ndarray, *, lr_scale: float, init: Any
    ) -> Any:
        rounds, start = self._rounds(init)
        data = self._xgb.DMatrix(x, label=y, weight=w, nthread=self.threads)
        # xgboost copies `xgb_model` before adding trees, so a rejected call keeps `init` intact.
        return self._xgb.train(
            self._native(lr_scale), data, num_boost_round=rounds, xgb_model=start
        )

    def _train_soft(
        self,
        rows: TrainingRows,
        objective: SoftmaxObjective,
        rounds: int,
        lr_scale: float,
        start: Any,
    ) -> Any:
        # The weights reach the objective's gradients (xgboost does not apply them to a custom
        # objective) and the DMatrix, where they weight the histogram sketch as the copies' did.
        data = self._xgb.DMatrix(rows.x, weight=rows.weights, nthread=self.threads)
        return self._xgb.train(
            self._native(lr_scale, custom=True),
            data,
            num_boost_round=rounds,
            obj=objective,
            xgb_model=start,
        )

    def _num_rounds(self, model: Any) -> int:
        booster = model.booster if isinstance(model, SoftBooster) else model
        return int(booster.num_boosted_rounds())

    def _raw(self, booster: Any, x: np.ndarray) -> np.ndarray:
        # With a custom objective xgboost's own output is not probabilities: take the margins
        # (a constant base_score on every class, which the softmax cancels).
        return booster.predict(self._xgb.DMatrix(x, nthread=self.threads), output_margin=True)

    def _builtin_proba(self, booster: Any, x: np.ndarray) -> np.ndarray:
        return booster.predict(self._xgb.DMatrix(x, nthread=self.threads))

    def _booster_state(self, booster: Any) -> bytes:
        return bytes(booster.save_raw("ubj"))

    def _load_booster(self, state: bytes) -> Any:
        booster = self._xgb.Booster(model_file=bytearray(state))
        booster.set_param({"nthread": self.threads})
        return booster


class LightGBMLearner(_BoosterLearner):
    """LightGBM through `lightgbm.train` with the `multiclass` objective over all classes.

    `params` are native parameters (e.g. {"num_leaves": 15, "learning_rate": 0.05}); the
    objective, `num_class`, `num_threads` (= `threads`), `seed` and `deterministic` are set by
    the learner. LightGBM's own `min_data_in_leaf` (20) applies unless `params` sets it (rows
    count there; with `soft_targets="copies"` the weighted copies do). See _BoosterLearner above
    for the rest.
    """

    _LR_KEYS = ("learning_rate", "shrinkage_rate", "eta")
    _DEFAULT_LR = 0.1  # LightGBM's default learning_rate

    def __init__(self, *, num_classes: int, **options: Any) -> None:
        _require("lightgbm", "LightGBMLearner", "lightgbm")
        super().__init__(num_classes=num_classes, **options)

    @property
    def _lgb(self) -> Any:
        return importlib.import_module("lightgbm")

    def _hessian_factor(self) -> float:
        # LightGBM's multiclass objective scales p (1 - p) by M / (M - 1).
        return self.num_classes / (self.num_classes - 1.0)

    def _native(self, lr_scale: float) -> dict[str, Any]:
        _, lr = self._lr()
        params = {"verbosity": -1, **self._without_lr()}
        params.update(
            objective="multiclass",
            num_class=self.num_classes,
            num_threads=self.threads,
            seed=self.seed,
            deterministic=True,
            force_row_wise=True,  # deterministic choice of histogram layout
            learning_rate=lr * lr_scale,
        )
        return params

    def _train(
        self, x: np.ndarray, y: np.ndarray, w: np.ndarray, *, lr_scale: float, init: Any
    ) -> Any:
        rounds, start = self._rounds(init)
        params = self._native(lr_scale)
        data = self._lgb.Dataset(x, label=y, weight=w, params=params, free_raw_data=True)
        # lightgbm starts from `init_model`'s predictions and merges its trees into a new
        # booster; `init` itself is not changed.
        return self._lgb.train(params, data, num_boost_round=rounds, init_model=start)

    def _train_soft(
        self,
        rows: TrainingRows,
        objective: SoftmaxObjective,
        rounds: int,
        lr_scale: float,
        start: Any,
    ) -> Any:
        params = self._native(lr_scale)
        params["objective"] = "none"  # the Dataset's copy: a callable is no Dataset parameter
        # Keep features no split can use (a site with fewer rows than min_data_in_leaf): with
        # none left, a custom objective's update fails where the built-in grows constant trees.
        params["feature_pre_filter"] = False
        # The label column is unused by the objective (the targets live in it); the weights
        # are applied by the objective, so the Dataset gets none (lightgbm would not apply
        # them to a custom objective's gradients either).
        data = self._lgb.Dataset(
            rows.x, label=rows.targets.argmax(axis=1), params=dict(params), free_raw_data=True
        )
        params["objective"] = objective
        # With init_model, lightgbm starts from the raw scores of its trees; the objective adds
        # the same base, so a continued model stays consistent.
        return self._lgb.train(params, data, num_boost_round=rounds, init_model=start)

    def _train_rows(self, rows: TrainingRows, *, lr_scale: float, init: Any) -> Any:
        if self.soft_targets == "objective" and not np.ptp(rows.x, axis=0).any():
            # Every feature constant: no tree can split, and lightgbm refuses a custom
            # objective on no features; the built-in objective's constant model is the same.
            return self._train(rows.copies_x(), rows.y, rows.w, lr_scale=lr_scale, init=None)
        return super()._train_rows(rows, lr_scale=lr_scale, init=init)

    def _num_rounds(self, model: Any) -> int:
        booster = model.booster if isinstance(model, SoftBooster) else model
        return int(booster.current_iteration())

    def _raw(self, booster: Any, x: np.ndarray) -> np.ndarray:
        return booster.predict(x, raw_score=True, num_threads=self.threads)

    def _builtin_proba(self, booster: Any, x: np.ndarray) -> np.ndarray:
        return booster.predict(x, num_threads=self.threads)

    def _booster_state(self, booster: Any) -> str:
        return booster.model_to_string()

    def _load_booster(self, state: str) -> Any:
        return self._lgb.Booster(model_str=state)
