"""learner_for_estimator: the right Learner for a user's estimator object."""

from __future__ import annotations

import warnings
from typing import Any

from cosmosfl.learners.base import Learner

# XGBClassifier's scikit-learn parameters that are not booster parameters (or that the learner
# sets itself).
_XGB_SKLEARN_ONLY = {
    "n_estimators", "objective", "n_jobs", "random_state", "missing", "enable_categorical",
    "feature_types", "feature_weights", "callbacks", "early_stopping_rounds", "eval_metric",
    "importance_type", "use_label_encoder", "num_class", "kwargs",
}  # fmt: skip
# LGBMClassifier's: the same, plus its spellings of native parameters that differ.
_LGB_SKLEARN_ONLY = {
    "n_estimators", "objective", "n_jobs", "random_state", "importance_type", "class_weight",
    "verbose", "num_class",
}  # fmt: skip
_LGB_RENAMED = {"boosting_type": "boosting"}


def learner_for_estimator(estimator: Any, num_classes: int, seed: int = 0) -> Learner:
    """Wrap `estimator` in the learner that trains it best.

    An `xgboost.XGBClassifier` becomes an XGBoostLearner with its booster parameters and
    `n_estimators` as `num_trees`; an `lightgbm.LGBMClassifier` a LightGBMLearner likewise; any
    other object with `predict_proba` (scikit-learn classifiers, Pipelines) a SklearnLearner.
    A class instead of an instance is built with its defaults; a Learner is returned as it is.
    Unset `random_state`s are set to `seed`, so the client is reproducible.
    """
    if isinstance(estimator, Learner):
        return estimator
    if isinstance(estimator, type):
        try:
            estimator = estimator()
        except TypeError as err:
            raise TypeError(
                f"{estimator.__name__} cannot be built without arguments ({err}); pass an "
                "instance, e.g. RandomForestClassifier(n_estimators=100)"
            ) from None
    kind = _kind(estimator)
    if kind == "xgboost":
        return _xgboost(estimator, num_classes, seed)
    if kind == "lightgbm":
        return _lightgbm(estimator, num_classes, seed)
    if not callable(getattr(estimator, "predict_proba", None)) or not callable(
        getattr(estimator, "fit", None)
    ):
        raise TypeError(
            f"{type(estimator).__name__} is not a probabilistic classifier (it needs fit and "
            "predict_proba): use e.g. sklearn.linear_model.LogisticRegression, "
            "RandomForestClassifier, xgboost.XGBClassifier or lightgbm.LGBMClassifier"
        )
    from cosmosfl.learners.sklearn import SklearnLearner

    return SklearnLearner(_seeded(estimator, seed), num_classes=num_classes)


def _kind(estimator: Any) -> str:
    """'xgboost' / 'lightgbm' for their scikit-learn classifiers (found without importing
    either library: by the class's module), else ''."""
    for cls in type(estimator).__mro__:
        module, name = cls.__module__.split(".")[0], cls.__name__
        if module == "xgboost" and name == "XGBClassifier":
            return "xgboost"
        if module == "lightgbm" and name == "LGBMClassifier":
            return "lightgbm"
    return ""


def _seeded(estimator: Any, seed: int) -> Any:
    """A clone of a scikit-learn estimator with every unset `random_state` (also inside a
    Pipeline) set to `seed`; other objects are returned as they are."""
    try:
        from sklearn.base import clone

        params = estimator.get_params(deep=True)
        copy = clone(estimator)
    except Exception:  # not a scikit-learn estimator: nothing to seed
        return estimator
    unset = {
        k: seed for k, v in params.items() if k.split("__")[-1] == "random_state" and v is None
    }
    if unset:
        copy.set_params(**unset)
    return copy


def _sklearn_params(estimator: Any) -> dict[str, Any]:
    params = dict(estimator.get_params(deep=False))
    params.update(params.pop("kwargs", None) or {})
    return params


def _common(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """num_trees, seed and threads from n_estimators, an int random_state and n_jobs > 0."""
    state, jobs = params.get("random_state"), params.get("n_jobs")
    return {
        "num_trees": int(params.get("n_estimators") or 100),
        "seed": int(state) if isinstance(state, int) else seed,
        "threads": int(jobs) if isinstance(jobs, int) and jobs > 0 else 1,
    }


def _xgboost(estimator: Any, num_classes: int, seed: int) -> Learner:
    from cosmosfl.learners.boosting import XGBoostLearner

    params = _sklearn_params(estimator)
    native = {k: v for k, v in params.items() if k not in _XGB_SKLEARN_ONLY and v is not None}
    return XGBoostLearner(num_classes=num_classes, params=native, **_common(params, seed))


def _lightgbm(estimator: Any, num_classes: int, seed: int) -> Learner:
    from cosmosfl.learners.boosting import LightGBMLearner

    params = _sklearn_params(estimator)
    if params.get("class_weight") is not None:
        warnings.warn(
            "LGBMClassifier(class_weight=...) is not carried over to LightGBMLearner (classes "
            "are weighted by the soft targets); the weights are ignored",
            UserWarning,
            stacklevel=3,
        )
    native = {
        _LGB_RENAMED.get(k, k): v
        for k, v in params.items()
        if k not in _LGB_SKLEARN_ONLY and v is not None
    }
    return LightGBMLearner(num_classes=num_classes, params=native, **_common(params, seed))
