"""Federated algorithms, each written once against the protocol and run by any engine."""

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord
from cosmosfl.algorithms.comet import Comet
from cosmosfl.algorithms.cosmos import Cosmos, torch_server_learner
from cosmosfl.algorithms.fedct import FedCT, majority_vote
from cosmosfl.algorithms.fedmd import FedMD
from cosmosfl.algorithms.local import Local
from cosmosfl.algorithms.registry import ALGORITHMS, algorithm_class

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Comet",
    "Cosmos",
    "FedCT",
    "FedMD",
    "Federation",
    "Local",
    "RoundRecord",
    "algorithm_class",
    "majority_vote",
    "torch_server_learner",
]
