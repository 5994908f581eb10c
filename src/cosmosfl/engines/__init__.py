"""Engines run algorithms: in-process simulation (default) and Flower (`engines.flower`).

`simulate` and `RunResult`, which wrap the engine for Python users, belong to the
experiment layer, a layer up (and are importable from the top-level package)."""

from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.simulation import ClientError, InProcessEngine

__all__ = ["ClientError", "EngineOptions", "InProcessEngine"]
