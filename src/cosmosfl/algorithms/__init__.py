"""Federated algorithms, each written once against the protocol and run by any engine."""

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord
from cosmosfl.algorithms.comet import Comet
from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.ditto import Ditto
from cosmosfl.algorithms.fedavg import FedAvg
from cosmosfl.algorithms.fedbabu import FedBABU
from cosmosfl.algorithms.fedct import FedCT, majority_vote
from cosmosfl.algorithms.fedmd import FedMD
from cosmosfl.algorithms.fedprox import FedProx
from cosmosfl.algorithms.fedselect import FedSelect
from cosmosfl.algorithms.local import Local
from cosmosfl.algorithms.params import ArchitectureMismatch
from cosmosfl.algorithms.pfedck import PFedCK
from cosmosfl.algorithms.pfedhn import PFedHN
from cosmosfl.algorithms.registry import (
    ALGORITHMS,
    algorithm_class,
    register_algorithm,
    unregister_algorithm,
)

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "ArchitectureMismatch",
    "Comet",
    "Cosmos",
    "Ditto",
    "FedAvg",
    "FedBABU",
    "FedCT",
    "FedMD",
    "FedProx",
    "FedSelect",
    "Federation",
    "Local",
    "PFedCK",
    "PFedHN",
    "RoundRecord",
    "algorithm_class",
    "majority_vote",
    "register_algorithm",
    "unregister_algorithm",
]
