"""Federated algorithms, each written once against the protocol and run by any engine."""

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord
from cosmosfl.algorithms.cosmos import Cosmos, torch_server_learner
from cosmosfl.algorithms.local import Local
from cosmosfl.algorithms.registry import ALGORITHMS, algorithm_class

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Cosmos",
    "Federation",
    "Local",
    "RoundRecord",
    "algorithm_class",
    "torch_server_learner",
]
