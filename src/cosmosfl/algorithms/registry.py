"""Algorithms by name. Adding an algorithm is adding one module and one line here."""

from __future__ import annotations

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.local import Local

ALGORITHMS: dict[str, type[Algorithm]] = {
    Cosmos.name: Cosmos,
    Local.name: Local,
}


def algorithm_class(name: str) -> type[Algorithm]:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(
            f"algorithm {name!r} is not known; allowed: {', '.join(sorted(ALGORITHMS))}"
        ) from None
