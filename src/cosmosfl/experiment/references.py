"""Reference runs: runs reported beside the algorithms that are not federated algorithms.

The `centralized` reference trains one model on the pooled private data of all clients, which
no federated protocol may do, so it is not in the algorithm registry: the config accepts its
name in `algorithm.name` (`REFERENCE_RUNS`), this module holds its settings, and centralized.py
runs it. The settings live apart from the run code so that the config schema can name them
without importing the builder or the runner.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.algorithms.hyperparameters import EpochSchedule
from cosmosfl.core.constraints import check_instance
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.models.registry import model_names


@dataclass
class Centralized(EpochSchedule):
    """Settings of the centralized reference (`algorithm: {name: centralized, ...}`).

    Epochs over the pooled data: `pretrain_epochs` in round 1, `local_epochs` after (the same
    names as COSMOS's E0 and E, so a comparison can give all runs the same training budget).
    """

    name: ClassVar[str] = "centralized"
    display_name: ClassVar[str] = "centralized"
    reported_model: ClassVar[str] = "client_model"
    primary_model: ClassVar[str] = reported_model  # deprecated name of reported_model
    reference: ClassVar[bool] = True  # reported after the algorithms (Algorithm.reference)

    def __post_init__(self) -> None:
        check_instance(self)

    @staticmethod
    def check_clients(client_models: list[str]) -> None:
        """Fail before any work when no client has a torch architecture to train centrally."""
        centralized_architecture(client_models)


# Runs that are reported beside the algorithms but are not federated (they may use data no
# protocol could). The config accepts these names in `algorithm.name`; the runner runs any
# setting object that is not an `Algorithm` with centralized.py's `run_reference`.
REFERENCE_RUNS: dict[str, type[Centralized]] = {Centralized.name: Centralized}


def centralized_architecture(client_models: list[str]) -> str:
    """The most frequent torch architecture among the clients (ties: the first listed)."""
    torch_names = set(model_names())
    counts = Counter(n for n in client_models if n in torch_names)
    if not counts:
        raise ConfigError(
            f"algorithm.name = 'centralized' needs at least one torch model in clients.models, "
            f"got only {sorted(set(client_models))}; allowed: {', '.join(sorted(torch_names))}"
        )
    # Counter keeps first-seen order, and max returns the first of equal counts.
    return max(counts, key=lambda n: counts[n])
