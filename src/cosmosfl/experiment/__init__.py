"""Experiments: config schema, runner, run directories, summaries, comparisons and sweeps.

Names are imported on first use: a Flower ClientApp imports `experiment.runner` on every
message (a process per message in deployment) and must not pay for comparisons, reports or
tracking it never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ConfigError": "cosmosfl.experiment.errors",
    "ExperimentConfig": "cosmosfl.experiment.config",
    "RunResult": "cosmosfl.experiment.result",
    "SimulationResult": "cosmosfl.experiment.result",  # RunResult's name until 0.3
    "build_experiment": "cosmosfl.experiment.build",
    "load_config": "cosmosfl.experiment.config",
    "plan_compare": "cosmosfl.experiment.compare",
    "run_centralized": "cosmosfl.experiment.centralized",
    "run_compare": "cosmosfl.experiment.compare",
    "run_experiment": "cosmosfl.experiment.runner",
    "simulate": "cosmosfl.experiment.inprocess",
    "summarize": "cosmosfl.experiment.summary",
    "torch_server_learner": "cosmosfl.experiment.server_models",
    # Reports moved up to their own layer (cosmosfl.reporting); still reachable from here.
    "write_report": "cosmosfl.reporting.report",
    "write_run_directory": "cosmosfl.experiment.summary",
}

__all__ = [
    "ConfigError",
    "ExperimentConfig",
    "RunResult",
    "SimulationResult",
    "build_experiment",
    "load_config",
    "plan_compare",
    "run_centralized",
    "run_compare",
    "run_experiment",
    "simulate",
    "summarize",
    "torch_server_learner",
    "write_report",  # cosmosfl.reporting's: not imported here, not even for type checkers
    "write_run_directory",
]

if TYPE_CHECKING:
    from cosmosfl.experiment.build import build_experiment
    from cosmosfl.experiment.centralized import run_centralized
    from cosmosfl.experiment.compare import plan_compare, run_compare
    from cosmosfl.experiment.config import ExperimentConfig, load_config
    from cosmosfl.experiment.errors import ConfigError
    from cosmosfl.experiment.inprocess import simulate
    from cosmosfl.experiment.result import RunResult, SimulationResult
    from cosmosfl.experiment.runner import run_experiment
    from cosmosfl.experiment.server_models import torch_server_learner
    from cosmosfl.experiment.summary import summarize, write_run_directory


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cosmosfl.experiment' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
