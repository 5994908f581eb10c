"""Experiment tracking: every round's metrics, and the config as hyperparameters, sent to
TensorBoard or MLflow as a run goes.

Optional and off by default (`tracking:` config section, `--tensorboard DIR`, `--mlflow URI`).
The run directory stays the record of a run; a tracker is a view of it. So a tracker that fails
while a run goes on prints one warning and stops logging instead of ending the run, and the
tracking section is not part of an experiment's identity (config.NOT_IDENTITY).

TensorBoard and MLflow are imported only when asked for; without them a one-line error names
the extra to install.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from cosmosfl.experiment.config import (
    ConfigError,
    ExperimentConfig,
    TrackingConfig,
    dump_config,
    flatten,
    identity,
)
from cosmosfl.experiment.rundir import write_atomic

TRACKING_FILE = "tracking.json"  # in the run directory: which MLflow run to continue on resume


class TrackingUnavailable(ConfigError):
    """A tracker was asked for but its package is not installed, or its store cannot be used."""


def round_metrics(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of one round record, as tracker metrics (the step is the round)."""
    out: dict[str, float] = {}
    for model, value in record.get("mean_accuracy", {}).items():
        out[f"accuracy/{model}"] = float(value)
    for model, value in record.get("mean_top5", {}).items():
        out[f"top5/{model}"] = float(value)
    if record.get("K") is not None:
        out["K"] = float(record["K"])
    for direction in ("up", "down"):
        per_client = record.get(f"bytes_{direction}", {})
        if per_client:  # mean over clients, as in the round summary line and the report
            out[f"bytes_{direction}_per_client"] = sum(per_client.values()) / len(per_client)
    for phase, seconds in record.get("seconds", {}).items():
        out[f"seconds/{phase}"] = float(seconds)
    out["rejected_replies"] = float(len(record.get("rejected", [])))
    return out


def config_params(cfg: ExperimentConfig) -> dict[str, Any]:
    """The config as flat hyperparameters (`algorithm.lam`, `data.num_clients`, ...)."""
    return flatten(identity(cfg))


class Tracker:
    """Receives a run's start, its round records and its end; the base class ignores them."""

    def start(self, cfg: ExperimentConfig, run_dir: Path | None, done: list[dict]) -> None:
        """A run starts; `done` holds the records of rounds finished before a resume."""

    def log_round(self, record: dict[str, Any]) -> None:
        pass

    def finish(self, summary: dict[str, Any] | None, status: str) -> None:
        """`status`: finished, failed or killed (Ctrl-C); `summary` only when finished."""

    @contextmanager
    def session(
        self, cfg: ExperimentConfig, run_dir: Path | None, done: list[dict]
    ) -> Iterator[None]:
        """start ... finish, with the status the run ended in."""
        self.start(cfg, run_dir, done)
        self._summary: dict[str, Any] | None = None
        try:
            yield
        except KeyboardInterrupt:
            self.finish(None, "killed")
            raise
        except BaseException:
            self.finish(None, "failed")
            raise
        self.finish(self._summary, "finished")

    def log_summary(self, summary: dict[str, Any]) -> None:
        self._summary = summary


class _Guarded(Tracker):
    """A tracker whose logging errors, once the run is going, become a warning, not a crash."""

    name = "tracker"

    def __init__(self) -> None:
        self.broken = False

    def _safely(self, what: str, fn: Any, *args: Any) -> None:
        if self.broken:
            return
        try:
            fn(*args)
        except Exception as err:  # the run matters more than its live view
            self.broken = True
            print(
                f"cosmosfl: warning: {self.name} {what} failed ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}); no more logging to "
                f"{self.name} in this run, the run directory has every number",
                file=sys.stderr,
            )

    def log_round(self, record: dict[str, Any]) -> None:
        self._safely("logging", self._log_round, record)

    def finish(self, summary: dict[str, Any] | None, status: str) -> None:
        self._safely("closing", self._finish, summary, status)

    def _log_round(self, record: dict[str, Any]) -> None:
        raise NotImplementedError

    def _finish(self, summary: dict[str, Any] | None, status: str) -> None:
        raise NotImplementedError


def _hparam(value: Any) -> int | float | str | bool:
    return value if isinstance(value, int | float | str | bool) else json.dumps(value)


class TensorBoardTracker(_Guarded):
    """Scalars per round under `<logdir>/<name>/`, the config as text and as HParams."""

    name = "TensorBoard"

    def __init__(self, logdir: str | Path, run_name: str, tags: dict[str, str]) -> None:
        super().__init__()
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise TrackingUnavailable(
                "tracking.tensorboard needs TensorBoard: pip install 'cosmosfl[tensorboard]'"
            ) from None
        self._writer_class = SummaryWriter
        self.path = Path(logdir) / run_name
        self.tags = tags
        self.params: dict[str, Any] = {}
        self.metric_names: set[str] = set()

    def start(self, cfg: ExperimentConfig, run_dir: Path | None, done: list[dict]) -> None:
        continuing = bool(done) and any(self.path.glob("events.out.tfevents.*"))
        # purge_step hides earlier events from that step on: a rerun replaces the old curves,
        # and a resumed run replaces the round the interruption cut short.
        purge = len(done) + 1 if continuing else 0
        try:
            self.writer = self._writer_class(log_dir=str(self.path), purge_step=purge)
        except OSError as err:
            raise TrackingUnavailable(
                f"tracking.tensorboard: cannot write to {str(self.path)!r}: {err}"
            ) from None
        self.params = {**{k: _hparam(v) for k, v in config_params(cfg).items()}, **self.tags}
        if not continuing:
            self.writer.add_text("config", "```yaml\n" + dump_config(cfg) + "```", 0)
            if self.tags:
                lines = [f"- {k}: {v}" for k, v in self.tags.items()]
                self.writer.add_text("tags", "\n".join(lines), 0)
            for record in done:
                self._log_round(record)

    def _log_round(self, record: dict[str, Any]) -> None:
        step = int(record["round"])
        for key, value in round_metrics(record).items():
            self.writer.add_scalar(key, value, step)
            self.metric_names.add(key)
        self.writer.flush()

    def _finish(self, summary: dict[str, Any] | None, status: str) -> None:
        from torch.utils.tensorboard.summary import hparams

        if summary is not None:
            # HParams reads each metric's last value from the scalars logged above.
            metrics = {k: 0.0 for k in sorted(self.metric_names) if k.startswith("accuracy/")}
            if summary.get("adjusted_rand_index") is not None:
                ari = float(summary["adjusted_rand_index"])
                self.writer.add_scalar("adjusted_rand_index", ari, int(summary["rounds"]))
                metrics["adjusted_rand_index"] = ari
            for item in hparams(self.params, metrics):
                self.writer.file_writer.add_summary(item)
        self.writer.close()


def mlflow_uri(value: str) -> str | None:
    """`tracking.mlflow` as a tracking URI: "default" is MLflow's own default (the environment
    variable MLFLOW_TRACKING_URI, else ./mlflow.db), a plain path to a .db file is a local
    SQLite store, anything else is a URI (http://host:5000, sqlite:///..., databricks)."""
    if value == "default":
        return None
    if "://" not in value and value != "databricks":
        path = Path(value)
        if path.suffix != ".db":
            raise TrackingUnavailable(
                f"tracking.mlflow = {value!r}: a local store is a path to a .db file "
                "(e.g. runs/mlflow.db), or give a URI (http://host:5000, sqlite:///mlflow.db) "
                "or 'default'"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path.resolve()}"
    return value


class MlflowTracker(_Guarded):
    """One MLflow run per cosmosfl run: config as params, round metrics by step, tags."""

    name = "MLflow"
    STATUS: ClassVar[dict[str, str]] = {
        "finished": "FINISHED",
        "failed": "FAILED",
        "killed": "KILLED",
    }

    def __init__(self, tracking: TrackingConfig, run_name: str, tags: dict[str, str]) -> None:
        super().__init__()
        try:
            from mlflow import MlflowClient
        except ImportError:
            raise TrackingUnavailable(
                "tracking.mlflow needs MLflow: pip install 'cosmosfl[mlflow]'"
            ) from None
        assert tracking.mlflow is not None
        self.setting = tracking.mlflow
        self.uri = mlflow_uri(tracking.mlflow)
        self.experiment = tracking.experiment
        self.run_name, self.tags = run_name, tags
        self._client_class = MlflowClient

    def start(self, cfg: ExperimentConfig, run_dir: Path | None, done: list[dict]) -> None:
        try:
            self.client = self._client_class(tracking_uri=self.uri)
            self.run_id = self._continued_run(run_dir) if done else None
            if self.run_id is None:
                self.run_id = self._new_run(cfg, run_dir, done)
        except Exception as err:  # before any training: a clear error, not a warning
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise TrackingUnavailable(
                f"tracking.mlflow = {self.setting!r}: MLflow could not start a run: {first}"
            ) from None

    def _continued_run(self, run_dir: Path | None) -> str | None:
        """The MLflow run of this run directory, if it was logged to the same store."""
        path = run_dir / TRACKING_FILE if run_dir is not None else None
        if path is None or not path.is_file():
            return None
        saved = json.loads(path.read_text()).get("mlflow", {})
        if saved.get("uri") != self.client.tracking_uri or "run_id" not in saved:
            return None
        self.client.update_run(saved["run_id"], status="RUNNING")
        return str(saved["run_id"])

    def _new_run(self, cfg: ExperimentConfig, run_dir: Path | None, done: list[dict]) -> str:
        from mlflow.entities import Param

        found = self.client.get_experiment_by_name(self.experiment)
        exp_id = found.experiment_id if found else self.client.create_experiment(self.experiment)
        run = self.client.create_run(exp_id, tags=self.tags, run_name=self.run_name)
        params = [Param(k, str(v)) for k, v in config_params(cfg).items()]
        self.client.log_batch(run.info.run_id, params=params)
        if run_dir is not None:
            doc = {"mlflow": {"uri": self.client.tracking_uri, "run_id": run.info.run_id}}
            write_atomic(run_dir / TRACKING_FILE, json.dumps(doc, indent=2) + "\n")
        self.run_id = run.info.run_id
        for record in done:  # tracking switched on for a resumed run: log its first rounds too
            self._log_round(record)
        return run.info.run_id

    def _log_round(self, record: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        now, step = int(time.time() * 1000), int(record["round"])
        metrics = [Metric(k, v, now, step) for k, v in round_metrics(record).items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def _finish(self, summary: dict[str, Any] | None, status: str) -> None:
        if summary is not None and summary.get("adjusted_rand_index") is not None:
            ari = float(summary["adjusted_rand_index"])
            self.client.log_metric(self.run_id, "adjusted_rand_index", ari, step=summary["rounds"])
        self.client.set_terminated(self.run_id, self.STATUS[status])


class Trackers(Tracker):
    """Several trackers as one."""

    def __init__(self, trackers: list[Tracker]) -> None:
        self.trackers = trackers

    def start(self, cfg: ExperimentConfig, run_dir: Path | None, done: list[dict]) -> None:
        for t in self.trackers:
            t.start(cfg, run_dir, done)

    def log_round(self, record: dict[str, Any]) -> None:
        for t in self.trackers:
            t.log_round(record)

    def finish(self, summary: dict[str, Any] | None, status: str) -> None:
        for t in self.trackers:
            t.finish(summary, status)


def make_tracker(
    tracking: TrackingConfig, run_name: str, tags: dict[str, str] | None = None
) -> Tracker:
    """The trackers `tracking` asks for (a no-op Tracker when none); fails now, before any
    training, when a package is missing."""
    tags = dict(tags or {})
    trackers: list[Tracker] = []
    if tracking.tensorboard is not None:
        trackers.append(TensorBoardTracker(tracking.tensorboard, run_name, tags))
    if tracking.mlflow is not None:
        trackers.append(MlflowTracker(tracking, run_name, tags))
    return trackers[0] if len(trackers) == 1 else Trackers(trackers)


def default_run_name(cfg: ExperimentConfig, run_dir: Path | None) -> str:
    """A run's name in the trackers: its directory's name, else <algorithm>-seed<seed>."""
    return run_dir.name if run_dir is not None else f"{cfg.algorithm['name']}-seed{cfg.seed}"
