"""From a config to a finished run: the engine, the rounds, checkpoints and the run directory
(the experiment itself is built by build.py)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import yaml

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.engines import workers as engine_workers
from cosmosfl.engines.base import Engine
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.progress import Reporter, make_reporter
from cosmosfl.engines.simulation import ClientError, InProcessEngine
from cosmosfl.experiment.build import Experiment, build_experiment
from cosmosfl.experiment.centralized import run_reference
from cosmosfl.experiment.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore,
    save_checkpoint,
)
from cosmosfl.experiment.config import (
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    dump_config,
    identity,
    load_config,
)
from cosmosfl.experiment.health import check_models, client_failure
from cosmosfl.experiment.preflight import check_federation
from cosmosfl.experiment.result import RunResult
from cosmosfl.experiment.rundir import CHECKPOINT, CONFIG, RunDirectory
from cosmosfl.experiment.summary import summarize
from cosmosfl.experiment.tracking import Tracker, default_run_name, make_tracker
from cosmosfl.learners.base import Learner

if TYPE_CHECKING:
    pass


def cluster_agreement(clusters: dict[int, int], groups: np.ndarray | None) -> dict[str, Any]:
    """How the clusters found compare with the true class groups (paper split only)."""
    if groups is None or not clusters:
        return {}
    from sklearn.metrics import adjusted_rand_score

    ids = sorted(clusters)
    found = [clusters[i] for i in ids]
    truth = [int(groups[i]) for i in ids]
    return {
        "true_groups": {str(i): t for i, t in zip(ids, truth, strict=True)},
        "adjusted_rand_index": float(adjusted_rand_score(truth, found)),
        "recovers_groups_exactly": bool(adjusted_rand_score(truth, found) == 1.0),
    }


EngineFactory = Callable[[Experiment, Reporter], Engine]
"""Builds the engine that runs the rounds (`Engine`, engines/base.py), e.g. the Flower
federation; the default is the in-process engine."""


def run_experiment(
    cfg: ExperimentConfig,
    out: str | Path | None = None,
    *,
    progress: bool | Reporter = True,
    force: bool = False,
    engine: EngineFactory | None = None,
    tracker: Tracker | None = None,
    strict: bool = False,
) -> RunResult:
    """Run a config end to end; with `out`, write the run directory as rounds complete, and a
    checkpoint after every round (see `resume_experiment`). `tracker` (default: the one
    cfg.tracking asks for) receives every round record. `strict` (the CLI's `--strict`): a
    rejected reply or a degenerate client model (experiment/health.py) stops the run; without
    it they are recorded (and degenerate models flagged in summary.json)."""
    run_dir = RunDirectory(Path(out)) if out is not None else None
    if run_dir is not None:  # a run, or the user's own files, there: refused before any work
        run_dir.check_free(force=force)
    with _torch_threads(cfg, engine):
        return _execute(
            cfg, run_dir, progress, force=force, engine=engine, tracker=tracker, strict=strict
        )


def run_built(exp: Experiment, *, progress: bool | Reporter = False) -> RunResult:
    """Run an experiment built (and altered) in Python, in process, with no run directory:
    the privacy audit plants canaries in a built experiment and runs it with this."""
    if not isinstance(exp.algorithm, Algorithm):
        raise ConfigError(f"{exp.config.algorithm['name']} is a reference run, not a federation")
    reporter = progress if isinstance(progress, Reporter) else make_reporter(bool(progress))
    with _torch_threads(exp.config, None):
        torch.manual_seed(exp.config.seed)
        return _run_federated(exp, exp.algorithm, reporter, None)


def resume_experiment(
    out: str | Path,
    *,
    progress: bool | Reporter = True,
    tracker: Tracker | None = None,
    strict: bool = False,
) -> RunResult:
    """Continue an interrupted run from its last complete round.

    The config is the run directory's own config.yaml; the clients, the algorithm's server
    state, the RNG states and the metrics so far come from its checkpoint, so the finished run
    has the same metrics as one that was never interrupted (on CPU).
    """
    run_dir = RunDirectory(Path(out))
    if run_dir.finished:
        raise CheckpointError(
            f"{run_dir.path} already holds a finished run (summary.json exists); nothing to resume"
        )
    config_path = run_dir.path / CONFIG
    if not config_path.is_file():
        raise CheckpointError(f"{run_dir.path} is not a run directory (no {CONFIG})")
    cfg = load_config(config_path)
    rounds = run_dir.recorded_rounds()
    if rounds and not (run_dir.path / CHECKPOINT).is_file():
        raise CheckpointError(
            f"{run_dir.path} holds {rounds} recorded round(s) but no {CHECKPOINT} (a run on "
            "an engine without checkpoints, or one killed before its first checkpoint), so it "
            f"cannot be resumed; start it over with `cosmosfl run --force --out {run_dir.path}`"
        )
    state = load_checkpoint(run_dir.path)
    if not _same_experiment(state["config"], cfg):
        raise CheckpointError(
            f"{config_path} differs from the config the checkpoint was made with; "
            "restore it, or start a new run"
        )
    with _torch_threads(cfg, None):
        return _execute(cfg, run_dir, progress, checkpoint=state, tracker=tracker, strict=strict)


def _same_experiment(config_text: str, cfg: ExperimentConfig) -> bool:
    """Whether a saved config (text) is `cfg`, up to what is not part of an experiment's
    identity (tracking) and up to settings added since with their defaults."""
    if config_text == dump_config(cfg):
        return True
    try:
        with warnings.catch_warnings():  # deprecated names in an old run's file: not the user's
            warnings.simplefilter("ignore", DeprecationWarning)
            saved = config_from_dict(yaml.safe_load(config_text))
    except (ConfigError, yaml.YAMLError):
        return False
    return identity(saved) == identity(cfg)


def resumable(out: str | Path, cfg: ExperimentConfig) -> bool:
    """Whether `out` holds an unfinished run of exactly `cfg` with a checkpoint to resume."""
    path = Path(out)
    if RunDirectory(path).finished or not (path / CHECKPOINT).is_file():
        return False
    config_path = path / CONFIG
    return config_path.is_file() and _same_experiment(config_path.read_text(), cfg)


def _execute(
    cfg: ExperimentConfig,
    run_dir: RunDirectory | None,
    progress: bool | Reporter,
    *,
    force: bool = False,
    checkpoint: dict[str, Any] | None = None,
    engine: EngineFactory | None = None,
    tracker: Tracker | None = None,
    strict: bool = False,
) -> RunResult:
    start = time.perf_counter()
    if tracker is None:  # a missing tracking package fails here, before any work
        tracker = make_tracker(cfg.tracking, default_run_name(cfg, run_dir and run_dir.path))
    # Everything is validated before the run directory is touched. Sites on another engine
    # (Flower) build their own clients: the server opens no site's file, only U.
    remote_sites = engine is not None and cfg.sites.public is not None
    exp = build_experiment(cfg, clients=[] if remote_sites else None)
    if checkpoint is not None and not isinstance(exp.algorithm, Algorithm):
        raise CheckpointError(
            f"{cfg.algorithm['name']} is a reference run without checkpoints; rerun it"
        )
    if engine is None and isinstance(exp.algorithm, Algorithm):
        # The in-process engine's clients are all here: check them against U and the server
        # model before any training (another engine's clients live elsewhere).
        check_federation(exp.algorithm, exp.clients, exp.public_x, seed=cfg.seed)
    with run_dir.locked() if run_dir is not None else nullcontext():
        if run_dir is not None and checkpoint is None:
            run_dir.prepare(cfg, force=force)
        if run_dir is not None and checkpoint is not None and run_dir.finished:
            raise CheckpointError(f"{run_dir.path} was finished by another process meanwhile")
        reporter = progress if isinstance(progress, Reporter) else make_reporter(bool(progress))
        reporter.log(
            f"{cfg.algorithm['name']} on {exp.data_name}: {len(exp.client_ids)} clients "
            f"({', '.join(sorted(set(exp.client_models))) or 'models on their sites'}), "
            f"|U| = {len(exp.public_x)}, "
            f"{cfg.rounds} rounds, seed {cfg.seed}"
        )
        for line in exp.privacy:
            reporter.log(f"privacy: {line}")
        torch.manual_seed(cfg.seed)
        done = list(checkpoint["records"]) if checkpoint is not None else []
        with tracker.session(cfg, run_dir and run_dir.path, done):
            result, summary = _run_and_summarize(
                exp, reporter, run_dir, checkpoint, engine, tracker, start, strict
            )
            tracker.log_summary(summary)
    result.summary = summary  # type: ignore[attr-defined]
    return result


def _run_and_summarize(
    exp: Experiment,
    reporter: Reporter,
    run_dir: RunDirectory | None,
    checkpoint: dict[str, Any] | None,
    engine: EngineFactory | None,
    tracker: Tracker,
    start: float,
    strict: bool = False,
) -> tuple[RunResult, dict[str, Any]]:
    cfg = exp.config
    degenerate: dict[int, dict[str, Any]] = {}
    if isinstance(exp.algorithm, Algorithm):
        result = _run_federated(
            exp, exp.algorithm, reporter, run_dir, checkpoint, engine, tracker, strict, degenerate
        )
    else:  # a reference run (centralized): not a protocol algorithm, see references.py

        def on_record(record: dict[str, Any]) -> None:
            if run_dir is not None:
                run_dir.append_record(record)
            tracker.log_round(record)

        result = run_reference(exp, cfg.rounds, reporter, on_record=on_record)
    meta = {
        "seed": cfg.seed,
        "dataset": exp.data_name,
        "num_clients": len(exp.client_ids),
        "client_models": {
            str(c.id): n for c, n in zip(exp.clients, exp.client_models, strict=True)
        },
        "client_parameters": {str(c.id): _parameter_count(c.learner) for c in exp.clients},
        "public_size": len(exp.public_x),
        "num_classes": exp.num_classes,
        **(
            {"partition": cfg.data.partition, "alpha": cfg.data.alpha}
            if exp.partition is not None
            else {"partition": "sites", "labels": list(exp.labels)}
        ),
    }
    summary = summarize(result, meta, wall_seconds=time.perf_counter() - start)
    if degenerate:
        summary["degenerate_clients"] = {str(c): v for c, v in degenerate.items()}
    if result.clusters is not None and exp.partition is not None:
        summary.update(cluster_agreement(result.clusters, exp.partition.client_group))
    if run_dir is not None:
        run_dir.finish(summary)
    return result, summary


def _run_federated(
    exp: Experiment,
    algorithm: Algorithm,
    reporter: Reporter,
    run_dir: RunDirectory | None,
    checkpoint: dict[str, Any] | None = None,
    engine_factory: EngineFactory | None = None,
    tracker: Tracker | None = None,
    strict: bool = False,
    degenerate: dict[int, dict[str, Any]] | None = None,
) -> RunResult:
    """The rounds; `degenerate` receives the degenerate client models after the last round
    (in-process clients only: another engine's clients live elsewhere)."""
    cfg = exp.config
    result = RunResult(algorithm.name, algorithm.reported_model)
    first = 1
    if checkpoint is not None:  # before the engine starts: worker processes copy the clients
        result.records = restore(checkpoint, algorithm, exp.clients)
        first = int(checkpoint["round"]) + 1
        if run_dir is not None:  # drop any record of the round the interruption cut short
            run_dir.rewrite_records(result.records)
        reporter.log(f"resuming after round {first - 1} of {cfg.rounds}")
    # Checkpoints hold the clients' states, which only the in-process engine has: a run on
    # another engine (Flower: the clients live on their nodes) is not checkpointed.
    checkpointing = engine_factory is None
    engine: Engine
    if engine_factory is not None:
        engine = engine_factory(exp, reporter)
    else:
        engine = in_process = InProcessEngine(
            exp.clients,
            exp.public_x,
            seed=cfg.seed,
            device=cfg.device,
            reporter=reporter,
            options=engine_options(cfg),
            on_reject="raise" if strict else "record",
        )
        reporter.log(describe_parallelism(cfg, len(exp.clients), workers=in_process.workers))
    for notice in cfg.notices:
        reporter.log(f"note: {notice}")
    config_text = dump_config(cfg)
    try:
        with reporter.running(cfg.rounds):
            for t in range(first, cfg.rounds + 1):
                try:
                    record = engine.run_round(algorithm, t, cfg.rounds)
                except ClientError as err:
                    raise client_failure(err, exp, run_dir, t) from None
                result.records.append(record)
                if checkpointing and ((strict and t == 1) or t == cfg.rounds):
                    engine.sync_clients()
                    check_models(exp, t, cfg.rounds, strict, reporter, degenerate)
                # The checkpoint (which holds every record so far) is written before the
                # record is appended to metrics.jsonl: killed between the two, the folder
                # holds a checkpoint ahead of metrics.jsonl, and --resume rewrites the file
                # from it; never a record without a checkpoint that holds it.
                if run_dir is not None and checkpointing:
                    engine.sync_clients()  # trained learners out of worker processes, if any
                    save_checkpoint(
                        run_dir.path, t, algorithm, exp.clients, result.records, config_text
                    )
                if run_dir is not None:
                    run_dir.append_record(record)
                if tracker is not None:
                    tracker.log_round(record)
    finally:
        engine.close()
    return result


@contextmanager
def _torch_threads(cfg: ExperimentConfig, engine: EngineFactory | None) -> Iterator[None]:
    """This process's torch threads for the run (`parallelism`; another engine's server
    keeps `cfg.threads` as given), put back afterwards: runs in one process do not leak it."""
    before = torch.get_num_threads()
    threads = parallelism(cfg)[1] if engine is None else cfg.threads
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def parallelism(cfg: ExperimentConfig, num_clients: int | None = None) -> tuple[int, int | None]:
    """(worker processes, torch threads per process) a run of `cfg` uses on this machine.

    threads: `cfg.threads`, else 1 whenever workers is not 1 ("auto" included, even where it
    resolves to serial), so that the default gives the records of a serial `threads: 1` run
    on any machine; None (torch's default) only for `workers: 1` with threads unset."""
    n = cfg.data.num_clients if num_clients is None else num_clients
    threads = cfg.threads if cfg.threads is not None else (None if cfg.workers == 1 else 1)
    workers = engine_workers.resolve_workers(cfg.workers, max(int(n), 1), threads=threads or 1)
    return workers, threads


def engine_options(cfg: ExperimentConfig) -> EngineOptions:
    """The engine settings of a run of `cfg`, for either engine: faults, participation, the
    payload limit, and the worker processes and threads `parallelism` gives (which only the
    in-process engine uses: Flower's clients run on their own nodes)."""
    return EngineOptions(
        faults=cfg.faults,
        min_participation=cfg.min_participation,
        max_payload_bytes=cfg.max_payload_bytes,
        workers=cfg.workers,
        threads=parallelism(cfg)[1] or 1,
    )


def describe_parallelism(
    cfg: ExperimentConfig, num_clients: int | None = None, *, workers: int | None = None
) -> str:
    """One line for the run header (`workers`: what the engine chose) and show-config (the
    data not loaded: "up to", auto stays serial for small work): what `workers` resolves to."""
    n = cfg.data.num_clients if num_clients is None else num_clients
    most, threads = parallelism(cfg, n)
    if threads is None:
        per = f"torch's default threads ({torch.get_num_threads()})"
    else:
        per = f"{threads} torch thread{'s' if threads > 1 else ''}"
    if workers is None and cfg.workers == "auto" and most > 1:
        how = f"up to {most} worker processes (serial when the work is small)"
    elif (most if workers is None else workers) == 1:
        how = "serial in this process"
        if cfg.workers == "auto" and most > 1:
            how += " (the work is small: worker start-up would cost more than it saves)"
    else:
        how = f"{most if workers is None else workers} worker processes"
    each = " each" if "worker processes" in how and threads is not None else ""
    cores = engine_workers.usable_cores()
    where = f" ({cores} usable core{'s' if cores != 1 else ''}, {n} clients)"
    why = where if cfg.workers == "auto" else ""
    return f"workers: {cfg.workers}{why} -> {how}, {per}{each}"


def _parameter_count(learner: Learner) -> int | None:
    """Trainable parameters of a torch client (what FedAvg would send); None otherwise."""
    model = getattr(learner, "model", None)
    if model is None:
        return None
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))
