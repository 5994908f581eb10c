"""XGBoostLearner and LightGBMLearner: gradient-boosted trees behind the Learner contract.

Both are optional extras (`pip install 'cosmosfl[xgboost]'` / `'cosmosfl[lightgbm]'`), imported
only when a learner is built. They train through the native APIs (`xgboost.train`,
`lightgbm.train`) with the multiclass soft-probability objective over all M classes, so a client
missing classes needs no label re-encoding.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from cosmosfl.learners.refit import DIVERGENCE_TOLERANCE, MIN_TARGET_MASS, RefitLearner


def _require(module: str, learner: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{learner} needs {module}: pip install 'cosmosfl[{extra}]'") from err


class _BoosterLearner(RefitLearner):
    """Shared by both boosters: soft targets as weighted copies, continued boosting on the union.

    Soft targets: each public row becomes one copy per class with weight target[c] × weight ×
    `public_weight`; with the multiclass softmax objective, weighted copies are exactly the
    soft-label cross-entropy (both libraries document sample weights for it).

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
    ) -> None:
        super().__init__(
            num_classes=num_classes,
            public_weight=public_weight,
            divergence_tolerance=divergence_tolerance,
            max_retries=max_retries,
            min_target_mass=min_target_mass,
        )
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

    def _native(self, lr_scale: float) -> dict[str, Any]:
        key, lr = self._lr()
        params = {"verbosity": 0, "tree_method": "hist", **self._without_lr()}
        params.update(
            objective="multi:softprob",
            num_class=self.num_classes,
            nthread=self.threads,
            seed=self.seed,
            **{key: lr * lr_scale},
        )
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

    def _num_rounds(self, model: Any) -> int:
        return int(model.num_boosted_rounds())

    def _proba(self, model: Any, x: np.ndarray) -> np.ndarray:
        return model.predict(self._xgb.DMatrix(x, nthread=self.threads))

    def _model_state(self, model: Any) -> bytes:
        return bytes(model.save_raw("ubj"))

    def _load_model(self, state: bytes) -> Any:
        booster = self._xgb.Booster(model_file=bytearray(state))
        booster.set_param({"nthread": self.threads})
        return booster


class LightGBMLearner(_BoosterLearner):
    """LightGBM through `lightgbm.train` with the `multiclass` objective over all classes.

    `params` are native parameters (e.g. {"num_leaves": 15, "learning_rate": 0.05}); the
    objective, `num_class`, `num_threads` (= `threads`), `seed` and `deterministic` are set by
    the learner. LightGBM's own `min_data_in_leaf` (20) applies unless `params` sets it; weighted
    copies count as rows there. See _BoosterLearner above for the rest.
    """

    _LR_KEYS = ("learning_rate", "shrinkage_rate", "eta")
    _DEFAULT_LR = 0.1  # LightGBM's default learning_rate

    def __init__(self, *, num_classes: int, **options: Any) -> None:
        _require("lightgbm", "LightGBMLearner", "lightgbm")
        super().__init__(num_classes=num_classes, **options)

    @property
    def _lgb(self) -> Any:
        return importlib.import_module("lightgbm")

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

    def _num_rounds(self, model: Any) -> int:
        return int(model.current_iteration())

    def _proba(self, model: Any, x: np.ndarray) -> np.ndarray:
        return model.predict(x, num_threads=self.threads)

    def _model_state(self, model: Any) -> str:
        return model.model_to_string()

    def _load_model(self, state: str) -> Any:
        return self._lgb.Booster(model_str=state)
