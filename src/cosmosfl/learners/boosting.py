"""XGBoostLearner and LightGBMLearner: gradient-boosted trees behind the Learner contract.

Both are optional extras (`pip install 'cosmosfl[xgboost]'` / `'cosmosfl[lightgbm]'`), imported
only when a learner is built; what they share (soft targets, continued boosting, the divergence
guard) is `BoosterLearner` (learners/booster.py). `from_estimator` turns the library's
scikit-learn classifier (`XGBClassifier`, `LGBMClassifier`) into the learner with its native
parameters.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, ClassVar

import numpy as np

from cosmosfl.learners.booster import BoosterLearner, SoftBooster
from cosmosfl.learners.softmax_objective import SoftmaxObjective
from cosmosfl.learners.training_rows import TrainingRows


def _estimator_options(estimator: Any, cls: Any, seed: int) -> dict[str, Any]:
    """The learner's parameters from a scikit-learn booster classifier's: the native ones
    (less `cls._SKLEARN_ONLY`, renamed by `cls._RENAMED`, unset ones dropped) as `params`;
    num_trees, seed and threads from n_estimators, an int random_state and n_jobs > 0."""
    params = dict(estimator.get_params(deep=False))
    params.update(params.pop("kwargs", None) or {})
    renamed = getattr(cls, "_RENAMED", {})
    native = {
        renamed.get(k, k): v
        for k, v in params.items()
        if k not in cls._SKLEARN_ONLY and v is not None
    }
    state, jobs = params.get("random_state"), params.get("n_jobs")
    return {
        "params": native,
        "num_trees": int(params.get("n_estimators") or 100),
        "seed": int(state) if isinstance(state, int) else seed,
        "threads": int(jobs) if isinstance(jobs, int) and jobs > 0 else 1,
    }


class XGBoostLearner(BoosterLearner):
    """XGBoost through `xgboost.train` with `multi:softprob` over all `num_classes` classes.

    `params` are native booster parameters (e.g. {"max_depth": 4, "eta": 0.1}); the objective,
    `num_class`, `nthread` (= `threads`) and `seed` are set by the learner. See _BoosterLearner
    above for soft targets, continued boosting and the divergence guard.
    """

    _LIBRARY = "xgboost"
    _LR_KEYS = ("eta", "learning_rate")
    _DEFAULT_LR = 0.3  # xgboost's default eta
    # XGBClassifier's scikit-learn parameters that are no booster parameters (or that the
    # learner sets itself).
    _SKLEARN_ONLY = frozenset({
        "n_estimators", "objective", "n_jobs", "random_state", "missing", "enable_categorical",
        "feature_types", "feature_weights", "callbacks", "early_stopping_rounds", "eval_metric",
        "importance_type", "use_label_encoder", "num_class", "kwargs",
    })  # fmt: skip

    @classmethod
    def from_estimator(cls, estimator: Any, num_classes: int, seed: int = 0) -> XGBoostLearner:
        """The learner of an `xgboost.XGBClassifier`: its booster parameters as `params`,
        `n_estimators` as `num_trees`, an int `random_state` as `seed` (else `seed`) and
        `n_jobs` > 0 as `threads` (else 1)."""
        return cls(num_classes=num_classes, **_estimator_options(estimator, cls, seed))

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


class LightGBMLearner(BoosterLearner):
    """LightGBM through `lightgbm.train` with the `multiclass` objective over all classes.

    `params` are native parameters (e.g. {"num_leaves": 15, "learning_rate": 0.05}); the
    objective, `num_class`, `num_threads` (= `threads`), `seed` and `deterministic` are set by
    the learner. LightGBM's own `min_data_in_leaf` (20) applies unless `params` sets it (rows
    count there; with `soft_targets="copies"` the weighted copies do). See BoosterLearner
    (learners/booster.py) for the rest.
    """

    _LIBRARY = "lightgbm"
    _LR_KEYS = ("learning_rate", "shrinkage_rate", "eta")
    _DEFAULT_LR = 0.1  # LightGBM's default learning_rate
    # LGBMClassifier's scikit-learn parameters that are no native parameters (or that the
    # learner sets itself), and its spellings of native parameters that differ.
    _SKLEARN_ONLY = frozenset({
        "n_estimators", "objective", "n_jobs", "random_state", "importance_type", "class_weight",
        "verbose", "num_class",
    })  # fmt: skip
    _RENAMED: ClassVar[dict[str, str]] = {"boosting_type": "boosting"}

    @classmethod
    def from_estimator(cls, estimator: Any, num_classes: int, seed: int = 0) -> LightGBMLearner:
        """The learner of a `lightgbm.LGBMClassifier`, as `XGBoostLearner.from_estimator`
        (`boosting_type` becomes `boosting`); a `class_weight` is not carried over (classes are
        weighted by the soft targets), with a UserWarning."""
        if estimator.get_params(deep=False).get("class_weight") is not None:
            warnings.warn(
                "LGBMClassifier(class_weight=...) is not carried over to LightGBMLearner (classes "
                "are weighted by the soft targets); the weights are ignored",
                UserWarning,
                stacklevel=3,
            )
        return cls(num_classes=num_classes, **_estimator_options(estimator, cls, seed))

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
