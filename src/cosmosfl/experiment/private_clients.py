"""The config's `privacy` section applied to built clients: each client's learner behind its
site's mechanism, calibrated to the run's planned fits (privacy/setup.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from cosmosfl.client import Client
from cosmosfl.core.constraints import check_parameters, check_rules
from cosmosfl.core.seeds import derive_seed
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.privacy.deps import PrivacyUnavailableError
from cosmosfl.privacy.settings import PrivacyConfig

if TYPE_CHECKING:
    from cosmosfl.experiment.config import ExperimentConfig

PRIVACY_KEYS = tuple(f.name for f in dataclasses.fields(PrivacyConfig))


def site_settings(
    cfg: ExperimentConfig, own: Mapping[str, Any], where: str
) -> tuple[PrivacyConfig, str | None]:
    """A site's privacy settings: its site file's `privacy` over the run config's, checked;
    and why the site must be refused (None: it may join) when the run requires a guarantee
    (`privacy.require_epsilon`) the site does not give."""
    run = cfg.privacy
    try:
        settings = dataclasses.replace(run, **dict(own), require_epsilon=run.require_epsilon)
        check_parameters(PrivacyConfig, vars(settings), "privacy")
        check_rules(settings)
        if settings.enabled:
            check_rules(dataclasses.replace(cfg, privacy=settings))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: {err}") from None
    need = run.require_epsilon
    if need is not None and (settings.epsilon is None or settings.epsilon > need):
        return settings, (
            f"{where}: the run requires every site to keep ε <= {need:g} "
            f"(privacy.require_epsilon); this site's privacy.epsilon is {settings.epsilon}"
        )
    return settings, None


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
