"""The names a comparison can run, and the order and role in which it runs and shows them:
COSMOS (proposed), the federated baselines (registry order), then the references (`local`,
which never communicates, and `centralized`, which pools private data). Reports read the same
order, names and roles (cosmosfl.reporting).
"""

from __future__ import annotations

from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.experiment.config import reference_runs

PROPOSED = "cosmos"
# Non-federated references, reported after the algorithms: `local` never communicates and
# `centralized` pools private data. Everything else is a federated baseline.
REFERENCES = ("local", "centralized")


def display_name(algorithm: str) -> str:
    """How tables and plots name an algorithm or reference run: its class's `display_name`
    ("COSMOS", "FedAvg"); a name nothing registers is shown as it is."""
    cls = ALGORITHMS.get(algorithm) or reference_runs().get(algorithm)
    return str(getattr(cls, "display_name", algorithm))


def role(algorithm: str) -> str:
    """'proposed', 'baseline' (federated, compared for †) or 'reference'."""
    if algorithm == PROPOSED:
        return "proposed"
    return "reference" if algorithm in REFERENCES else "baseline"


def algorithm_order(names: list[str]) -> list[str]:
    """COSMOS first, then the baselines (registry order, then by name), then the references."""
    registry = list(ALGORITHMS)

    def key(name: str) -> tuple[int, int, str]:
        group = {"proposed": 0, "baseline": 1, "reference": 2}[role(name)]
        if group == 2:
            return group, REFERENCES.index(name), name
        return group, registry.index(name) if name in registry else len(registry), name

    return sorted(names, key=key)


def known_names() -> list[str]:
    """Every name `--algorithms` accepts: registered algorithms and reference runs."""
    return algorithm_order([*ALGORITHMS, *reference_runs()])
