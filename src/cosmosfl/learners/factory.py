"""learner_for_estimator: the right Learner for a user's estimator object."""

from __future__ import annotations

from typing import Any

from cosmosfl.learners.base import Learner


def learner_for_estimator(estimator: Any, num_classes: int, seed: int = 0) -> Learner:
    """Wrap `estimator` in the learner that trains it best.

    An `xgboost.XGBClassifier` becomes an XGBoostLearner with its booster parameters and
    `n_estimators` as `num_trees` (`XGBoostLearner.from_estimator`); an
    `lightgbm.LGBMClassifier` a LightGBMLearner likewise (`LightGBMLearner.from_estimator`); any
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


def _xgboost(estimator: Any, num_classes: int, seed: int) -> Learner:
    from cosmosfl.learners.boosting import XGBoostLearner

    return XGBoostLearner.from_estimator(estimator, num_classes, seed)


def _lightgbm(estimator: Any, num_classes: int, seed: int) -> Learner:
    from cosmosfl.learners.boosting import LightGBMLearner

    return LightGBMLearner.from_estimator(estimator, num_classes, seed)
