"""Experiments: config schema, runner and run directories."""

from cosmosfl.experiment.config import ConfigError, ExperimentConfig, load_config
from cosmosfl.experiment.runner import build_experiment, run_experiment

__all__ = ["ConfigError", "ExperimentConfig", "build_experiment", "load_config", "run_experiment"]
