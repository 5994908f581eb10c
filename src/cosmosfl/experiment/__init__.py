"""Experiments: config schema, runner, run directories, summaries, comparisons and reports."""

from cosmosfl.experiment.centralized import run_centralized
from cosmosfl.experiment.compare import plan_compare, run_compare
from cosmosfl.experiment.config import ConfigError, ExperimentConfig, load_config
from cosmosfl.experiment.inprocess import simulate
from cosmosfl.experiment.report import write_report
from cosmosfl.experiment.result import SimulationResult
from cosmosfl.experiment.runner import build_experiment, run_experiment
from cosmosfl.experiment.server_models import torch_server_learner
from cosmosfl.experiment.summary import summarize, write_run_directory

__all__ = [
    "ConfigError",
    "ExperimentConfig",
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
    "write_report",
    "write_run_directory",
]
