"""The names a comparison can run, and the order and role in which it runs and shows them:
COSMOS (proposed), the federated baselines (registry order), then the references (`local`,
which never communicates, and `centralized`, which pools private data). Reports read the same
order, names and roles (cosmosfl.reporting).
"""

from __future__ import annotations

from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.experiment.config import reference_runs

PROPOSED = "cosmos"


def _class_of(algorithm: str) -> type | None:
    return ALGORITHMS.get(algorithm) or reference_runs().get(algorithm)


def display_name(algorithm: str) -> str:
    """How tables and plots name an algorithm or reference run: its class's `display_name`
    ("COSMOS", "FedAvg"); a name nothing registers is shown as it is."""
    return str(getattr(_class_of(algorithm), "display_name", algorithm))


def role(algorithm: str) -> str:
    """'proposed', 'baseline' (federated, compared for †) or 'reference' (a class that
    declares `reference`: `local`, which never communicates, and `centralized`, which pools
    private data)."""
    if algorithm == PROPOSED:
        return "proposed"
    return "reference" if getattr(_class_of(algorithm), "reference", False) else "baseline"


def algorithm_order(names: list[str]) -> list[str]:
    """COSMOS first, then the baselines, then the references; each group in registry order
    (algorithms, then reference runs), then by name."""
    registry = [*ALGORITHMS, *reference_runs()]

    def key(name: str) -> tuple[int, int, str]:
        group = {"proposed": 0, "baseline": 1, "reference": 2}[role(name)]
        return group, registry.index(name) if name in registry else len(registry), name

    return sorted(names, key=key)


def known_names() -> list[str]:
    """Every name `--algorithms` accepts: registered algorithms and reference runs."""
    return algorithm_order([*ALGORITHMS, *reference_runs()])
