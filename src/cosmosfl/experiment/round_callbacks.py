"""The run loop's round callbacks for a run from a config (runner.py): the run directory,
its header lines, experiment tracking, the health check of client models and checkpoints,
each a `RoundCallback` (loop.py) that `run_experiment` hands to the one loop, in order."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from cosmosfl.engines.base import Engine
from cosmosfl.engines.progress import Reporter
from cosmosfl.experiment.build import Experiment
from cosmosfl.experiment.checkpoint import CheckpointError, save_checkpoint
from cosmosfl.experiment.config import ExperimentConfig, dump_config
from cosmosfl.experiment.health import check_models
from cosmosfl.experiment.loop import RoundCallback
from cosmosfl.experiment.result import RunResult
from cosmosfl.experiment.rundir import RunDirectory
from cosmosfl.experiment.tracking import Tracker


class RunDirectoryCallback(RoundCallback):
    """The run directory as the loop's callback: held locked for the run (prepared for a new
    run), each record appended, summary.json written at the end. Nothing without a folder."""

    def __init__(
        self, run_dir: RunDirectory | None, cfg: ExperimentConfig, *, force: bool, resuming: bool
    ) -> None:
        self.run_dir, self.cfg, self.force, self.resuming = run_dir, cfg, force, resuming

    @contextmanager
    def running(self) -> Iterator[None]:
        if self.run_dir is None:
            yield
            return
        with self.run_dir.locked():
            if not self.resuming:
                self.run_dir.prepare(self.cfg, force=self.force)
            elif self.run_dir.finished:
                raise CheckpointError(
                    f"{self.run_dir.path} was finished by another process meanwhile"
                )
            yield

    def round_end(self, round_num: int, result: RunResult, engine: Engine) -> None:
        if self.run_dir is not None:
            self.run_dir.append_record(result.records[-1])

    def run_end(self, result: RunResult, summary: dict[str, Any]) -> None:
        if self.run_dir is not None:
            self.run_dir.finish(summary)


class Header(RoundCallback):
    """The run's header lines, once the run directory is held."""

    def __init__(self, exp: Experiment, reporter: Reporter) -> None:
        self.exp, self.reporter = exp, reporter

    @contextmanager
    def running(self) -> Iterator[None]:
        exp, cfg = self.exp, self.exp.config
        self.reporter.log(
            f"{cfg.algorithm.name} on {exp.data_name}: {len(exp.client_ids)} clients "
            f"({', '.join(sorted(set(exp.client_models))) or 'models on their sites'}), "
            f"|U| = {len(exp.public_x)}, "
            f"{cfg.rounds} rounds, seed {cfg.seed}"
        )
        for line in exp.privacy:
            self.reporter.log(f"privacy: {line}")
        yield


class TrackerCallback(RoundCallback):
    """Experiment tracking (tracking.py): a session for the run, every record, the summary."""

    def __init__(
        self,
        tracker: Tracker,
        cfg: ExperimentConfig,
        run_dir: RunDirectory | None,
        done: list[dict[str, Any]],
    ) -> None:
        self.tracker, self.cfg, self.run_dir, self.done = tracker, cfg, run_dir, done

    def running(self) -> AbstractContextManager[Any]:
        return self.tracker.session(self.cfg, self.run_dir and self.run_dir.path, self.done)

    def round_end(self, round_num: int, result: RunResult, engine: Engine) -> None:
        self.tracker.log_round(result.records[-1])

    def run_end(self, result: RunResult, summary: dict[str, Any]) -> None:
        self.tracker.log_summary(summary)


class HealthCheck(RoundCallback):
    """Degenerate client models (health.py) after round 1 under `strict` and after the last
    round, kept in `degenerate` for the summary; in-process clients only."""

    def __init__(self, exp: Experiment, strict: bool, reporter: Reporter, *, in_process: bool):
        self.exp, self.strict, self.reporter, self.in_process = exp, strict, reporter, in_process
        self.degenerate: dict[int, dict[str, Any]] = {}

    def round_end(self, round_num: int, result: RunResult, engine: Engine) -> None:
        rounds = self.exp.config.rounds
        if self.in_process and ((self.strict and round_num == 1) or round_num == rounds):
            engine.sync_clients()  # in-process only
            check_models(self.exp, round_num, rounds, self.strict, self.reporter, self.degenerate)


class Checkpointer(RoundCallback):
    """A checkpoint after every round, for `resume_experiment`. Checkpoints hold the clients'
    states, which only the in-process engine has: a run on another engine (Flower: the
    clients live on their nodes) is not checkpointed."""

    def __init__(self, run_dir: RunDirectory | None, exp: Experiment, *, in_process: bool):
        self.run_dir, self.exp, self.in_process = run_dir, exp, in_process
        self.config_text = dump_config(exp.config)

    def round_end(self, round_num: int, result: RunResult, engine: Engine) -> None:
        if self.run_dir is None or not self.in_process:
            return
        engine.sync_clients()  # learners out of worker processes
        save_checkpoint(
            self.run_dir.path,
            round_num,
            self.exp.algorithm,  # type: ignore[arg-type]
            self.exp.clients,
            result.records,
            self.config_text,
        )
