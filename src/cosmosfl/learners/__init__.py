"""Client-model contract and its implementations."""

from cosmosfl.learners.base import (
    Learner,
    accuracy_metrics,
    validate_distill_inputs,
    validate_fit_inputs,
)
from cosmosfl.learners.sklearn import SklearnLearner
from cosmosfl.learners.torch import TorchLearner, resolve_device

__all__ = [
    "Learner",
    "SklearnLearner",
    "TorchLearner",
    "accuracy_metrics",
    "resolve_device",
    "validate_distill_inputs",
    "validate_fit_inputs",
]
