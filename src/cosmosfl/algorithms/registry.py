"""Algorithms by name. Adding an algorithm is adding one module and one line here."""

from __future__ import annotations

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.algorithms.comet import Comet
from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.fedct import FedCT
from cosmosfl.algorithms.fedmd import FedMD
from cosmosfl.algorithms.local import Local

ALGORITHMS: dict[str, type[Algorithm]] = {
    Cosmos.name: Cosmos,
    Local.name: Local,
    FedMD.name: FedMD,
    FedCT.name: FedCT,
    Comet.name: Comet,
}


def algorithm_class(name: str) -> type[Algorithm]:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(
            f"algorithm {name!r} is not known; allowed: {', '.join(sorted(ALGORITHMS))}"
        ) from None
