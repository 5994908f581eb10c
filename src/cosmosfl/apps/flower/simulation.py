"""Deprecated: renamed `cosmosfl.apps.flower.simulation_runtime`, so that Flower's simulation
runtime is not mistaken for cosmosfl's in-process engine (`cosmosfl.engines.simulation`)."""

import warnings

from cosmosfl.apps.flower.simulation_runtime import quiet_flower_environment, simulate_on_flower

warnings.warn(
    "cosmosfl.apps.flower.simulation is deprecated; import cosmosfl.apps.flower.simulation_runtime",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["quiet_flower_environment", "simulate_on_flower"]
