"""The config's `privacy` section applied to built clients: each client's learner behind its
site's mechanism, calibrated to the run's planned fits (privacy/setup.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cosmosfl.client import Client
from cosmosfl.core.seeds import derive_seed
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.privacy.deps import PrivacyUnavailableError
from cosmosfl.privacy.settings import PrivacyConfig


def epochs_plan(algorithm: Any, rounds: int) -> tuple[int, ...]:
    """Epochs of each planned fit on private data: E0 in round 1, E in every later round."""
    first, later = algorithm.epochs_for(True), algorithm.epochs_for(False)
    return (int(first),) + (int(later),) * (rounds - 1)


def privatise_clients(
    settings: PrivacyConfig,
    clients: list[Client],
    public_x: np.ndarray,
    algorithm: Any,
    rounds: int,
    seed: int,
) -> list[str]:
    """Put every client's learner behind its mechanism (in place); one line per client saying
    what was chosen. Nothing changes when privacy is off."""
    if not settings.enabled or not clients:
        return []
    try:
        from cosmosfl.privacy.setup import privatise

        plan = epochs_plan(algorithm, rounds)
        lines = []
        for client in clients:
            client.learner, line = privatise(
                client.id,
                client.learner,
                len(client.train[0]),
                public_x,
                settings,
                plan,
                derive_seed(seed, "privacy", client.id),
            )
            lines.append(line)
    except (ValueError, PrivacyUnavailableError) as err:
        raise ConfigError(str(err)) from None
    return lines
