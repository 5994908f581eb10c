"""Algorithms by name. Adding an algorithm is adding one module and one line here."""

from __future__ import annotations

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.algorithms.comet import Comet
from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.ditto import Ditto
from cosmosfl.algorithms.fedavg import FedAvg
from cosmosfl.algorithms.fedbabu import FedBABU
from cosmosfl.algorithms.fedct import FedCT
from cosmosfl.algorithms.fedmd import FedMD
from cosmosfl.algorithms.fedprox import FedProx
from cosmosfl.algorithms.fedselect import FedSelect
from cosmosfl.algorithms.local import Local
from cosmosfl.algorithms.pfedck import PFedCK
from cosmosfl.algorithms.pfedhn import PFedHN

ALGORITHMS: dict[str, type[Algorithm]] = {
    Cosmos.name: Cosmos,
    Local.name: Local,
    FedMD.name: FedMD,
    FedCT.name: FedCT,
    Comet.name: Comet,
    # Parameter-sharing baselines: one client architecture only (model_agnostic = False).
    FedAvg.name: FedAvg,
    FedProx.name: FedProx,
    Ditto.name: Ditto,
    FedBABU.name: FedBABU,
    FedSelect.name: FedSelect,
    PFedCK.name: PFedCK,
    PFedHN.name: PFedHN,
}


def algorithm_class(name: str) -> type[Algorithm]:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(
            f"algorithm {name!r} is not known; allowed: {', '.join(sorted(ALGORITHMS))}"
        ) from None
