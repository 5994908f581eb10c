"""Client-model contract and its implementations."""

from cosmosfl.learners.base import (
    Capabilities,
    Learner,
    accuracy_metrics,
    validate_distill_inputs,
    validate_fit_inputs,
)
from cosmosfl.learners.boosting import LightGBMLearner, XGBoostLearner
from cosmosfl.learners.device import resolve_device
from cosmosfl.learners.factory import learner_for_estimator
from cosmosfl.learners.refit import RefitLearner
from cosmosfl.learners.sklearn import SklearnLearner
from cosmosfl.learners.torch import TorchLearner

__all__ = [
    "Capabilities",
    "Learner",
    "LightGBMLearner",
    "RefitLearner",
    "SklearnLearner",
    "TorchLearner",
    "XGBoostLearner",
    "accuracy_metrics",
    "learner_for_estimator",
    "resolve_device",
    "validate_distill_inputs",
    "validate_fit_inputs",
]
