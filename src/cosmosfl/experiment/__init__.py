"""Experiments: config schema, runner, run directories and summaries."""

from cosmosfl.experiment.config import ConfigError, ExperimentConfig, load_config
from cosmosfl.experiment.runner import build_experiment, run_experiment
from cosmosfl.experiment.summary import summarize, write_run_directory

__all__ = [
    "ConfigError",
    "ExperimentConfig",
    "build_experiment",
    "load_config",
    "run_experiment",
    "summarize",
    "write_run_directory",
]
