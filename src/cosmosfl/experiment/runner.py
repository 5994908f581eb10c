"""From a config to a finished run: the engine, the rounds, checkpoints and the run directory
(the experiment itself is built by build.py)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.engines import workers as engine_workers
from cosmosfl.engines.base import Engine
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.progress import Reporter, make_reporter
from cosmosfl.engines.simulation import InProcessEngine
from cosmosfl.experiment.build import Experiment, build_experiment
from cosmosfl.experiment.centralized import run_reference
from cosmosfl.experiment.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore,
)
from cosmosfl.experiment.config import (
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    dump_config,
    identity,
    load_config,
)
from cosmosfl.experiment.health import client_failure
from cosmosfl.experiment.loop import (
    RoundCallback,
    process_threads,
    run_loop,
    torch_threads,
)
from cosmosfl.experiment.preflight import check_federation
from cosmosfl.experiment.result import RunResult
from cosmosfl.experiment.round_callbacks import (
    Checkpointer,
    Header,
    HealthCheck,
    RunDirectoryCallback,
    TrackerCallback,
)
from cosmosfl.experiment.rundir import CHECKPOINT, CONFIG, RunDirectory
from cosmosfl.experiment.summary import summarize
from cosmosfl.experiment.tracking import Tracker, default_run_name, make_tracker
from cosmosfl.learners.base import Learner


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
    callbacks: Sequence[RoundCallback] = (),
    checkpoint: dict[str, Any] | None = None,
) -> RunResult:
    """Run a config end to end; with `out`, write the run directory as rounds complete, and a
    checkpoint after every round (see `resume_experiment`). `tracker` (default: the one
    cfg.tracking asks for) receives every round record. `strict` (the CLI's `--strict`): a
    rejected reply or a degenerate client model (experiment/health.py) stops the run; without
    it they are recorded (and degenerate models flagged in summary.json). `callbacks`: more
    round callbacks (loop.py), run after the checkpoint and before the run directory's.
    `checkpoint`: the state of the interrupted run in `out` to continue from (what
    `resume_experiment` loads and checks)."""
    run_dir = RunDirectory(Path(out)) if out is not None else None
    if run_dir is not None and checkpoint is None:
        run_dir.check_free(force=force)  # a run, or the user's own files: refused before work
    with torch_threads(_driver_threads(cfg, engine)):
        start = time.perf_counter()
        if tracker is None:  # a missing tracking package fails here, before any work
            tracker = make_tracker(cfg.tracking, default_run_name(cfg, run_dir and run_dir.path))
        # Everything is validated before the run directory is touched. Sites on another engine
        # (Flower) build their own clients: the server opens no site's file, only U.
        remote_sites = engine is not None and cfg.sites.public is not None
        exp = build_experiment(cfg, clients=[] if remote_sites else None)
        if checkpoint is not None and not isinstance(exp.algorithm, Algorithm):
            raise CheckpointError(
                f"{cfg.algorithm.name} is a reference run without checkpoints; rerun it"
            )
        reporter = progress if isinstance(progress, Reporter) else make_reporter(bool(progress))
        done = list(checkpoint["records"]) if checkpoint is not None else []
        run_directory = RunDirectoryCallback(
            run_dir, cfg, force=force, resuming=checkpoint is not None
        )
        header = Header(exp, reporter)
        tracking = TrackerCallback(tracker, cfg, run_dir, done)
        if not isinstance(exp.algorithm, Algorithm):  # a reference run: not a federation
            return _run_reference(
                exp, reporter, run_dir, tracker, [run_directory, header, tracking], start
            )
        health = HealthCheck(exp, strict, reporter, in_process=engine is None)
        checkpoints = Checkpointer(run_dir, exp, in_process=engine is None)
        return run_loop(
            exp.algorithm,
            cfg.rounds,
            reporter=reporter,
            # In this order. The checkpoint (which holds every record so far) is written before
            # the record is appended to metrics.jsonl: killed between the two, the folder holds a
            # checkpoint ahead of metrics.jsonl, and --resume rewrites the file from it; never a
            # record without a checkpoint that holds it. The caller's callbacks (the Flower
            # ServerApp's summary fields) add to the summary before summary.json is written.
            callbacks=[health, checkpoints, *callbacks, run_directory, header, tracking],
            summarize=lambda result: _summary(exp, result, start, health.degenerate),
            **_engine_hooks(exp, reporter, run_dir, checkpoint, engine, strict),
        )


def run_built(exp: Experiment, *, progress: bool | Reporter = False) -> RunResult:
    """Run an experiment built (and altered) in Python, in process, with no run directory:
    the privacy audit plants canaries in a built experiment and runs it with this."""
    if not isinstance(exp.algorithm, Algorithm):
        raise ConfigError(f"{exp.config.algorithm.name} is a reference run, not a federation")
    reporter = progress if isinstance(progress, Reporter) else make_reporter(bool(progress))
    with torch_threads(_driver_threads(exp.config, None)):
        hooks = _engine_hooks(exp, reporter, None, None, None, strict=False)
        return run_loop(exp.algorithm, exp.config.rounds, reporter=reporter, **hooks)


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
    return run_experiment(
        cfg, run_dir.path, progress=progress, tracker=tracker, strict=strict, checkpoint=state
    )


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


def _run_reference(
    exp: Experiment,
    reporter: Reporter,
    run_dir: RunDirectory | None,
    tracker: Tracker,
    held: Sequence[RoundCallback],
    start: float,
) -> RunResult:
    """A reference run (centralized, references.py): not a protocol algorithm, so not the
    run loop, but the same run directory, header and tracking around it."""
    with ExitStack() as stack:
        for callback in held:
            stack.enter_context(callback.running())

        def on_record(record: dict[str, Any]) -> None:
            if run_dir is not None:
                run_dir.append_record(record)
            tracker.log_round(record)

        torch.manual_seed(exp.config.seed)
        result = run_reference(exp, exp.config.rounds, reporter, on_record=on_record)
        result.summary = _summary(exp, result, start, {})
        for callback in held:
            callback.run_end(result, result.summary)
    return result


def _summary(
    exp: Experiment, result: RunResult, start: float, degenerate: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """summary.json of a finished run: the summary of its records and what the run was."""
    cfg = exp.config
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
    return summary


def _engine_hooks(
    exp: Experiment,
    reporter: Reporter,
    run_dir: RunDirectory | None,
    checkpoint: dict[str, Any] | None,
    engine_factory: EngineFactory | None,
    strict: bool,
) -> dict[str, Any]:
    """The run loop's hooks for `exp` (loop.run_loop's keywords): the preflight of in-process
    clients against U (another engine's clients live elsewhere), the engine built after the
    seed and the checkpoint's restore, the rounds done, and a client's failure as one line."""
    cfg, algorithm = exp.config, exp.algorithm
    assert isinstance(algorithm, Algorithm)

    def preflight() -> None:
        if engine_factory is None:
            check_federation(algorithm, exp.clients, exp.public_x, seed=cfg.seed)

    def build_engine() -> Engine:
        torch.manual_seed(cfg.seed)
        if checkpoint is not None:  # before the engine starts: worker processes copy clients
            records = restore(checkpoint, algorithm, exp.clients)
            if run_dir is not None:  # drop any record of the round the interruption cut short
                run_dir.rewrite_records(records)
            reporter.log(f"resuming after round {len(records)} of {cfg.rounds}")
        if engine_factory is not None:
            return _logged(engine_factory(exp, reporter), cfg, reporter)
        engine = InProcessEngine(
            exp.clients,
            exp.public_x,
            seed=cfg.seed,
            device=cfg.device,
            reporter=reporter,
            options=engine_options(cfg),
            on_reject="raise" if strict else "record",
        )
        reporter.log(describe_parallelism(cfg, len(exp.clients), workers=engine.workers))
        return _logged(engine, cfg, reporter)

    return {
        "preflight": preflight,
        "build_engine": build_engine,
        "records": list(checkpoint["records"]) if checkpoint is not None else [],
        "client_failure": lambda err, t: client_failure(err, exp, run_dir, t),
    }


def _logged(engine: Engine, cfg: ExperimentConfig, reporter: Reporter) -> Engine:
    """`engine`, once the config's notices (changed defaults it relies on) are logged."""
    for notice in cfg.notices:
        reporter.log(f"note: {notice}")
    return engine


def _driver_threads(cfg: ExperimentConfig, engine: EngineFactory | None) -> int | None:
    """This process's torch threads for a run of `cfg` (loop.process_threads); a server whose
    clients run on another engine (Flower) has no worker processes."""
    return process_threads(cfg.workers if engine is None else 1, cfg.threads)


def parallelism(cfg: ExperimentConfig, num_clients: int | None = None) -> tuple[int, int | None]:
    """(worker processes, torch threads per process) a run of `cfg` uses on this machine;
    threads as `loop.process_threads` gives them (None: torch's default)."""
    n = cfg.data.num_clients if num_clients is None else num_clients
    threads = process_threads(cfg.workers, cfg.threads)
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
    model = learner.model if learner.capabilities.torch_model else None
    if model is None:
        return None
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))
