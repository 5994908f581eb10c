"""From a config to a finished run: data, partition, client models, algorithm, engine, run dir."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import yaml

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.client import Client
from cosmosfl.core.seeds import derive_seed
from cosmosfl.data import (
    ImageDataset,
    Partition,
    channel_stats,
    default_augmentation,
    load_dataset,
    make_partition,
    prepare_images,
    subsample,
    train_augmentation_for,
)
from cosmosfl.engines.progress import Reporter, make_reporter
from cosmosfl.engines.simulation import SimulationEngine
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
    reference_runs,
    settings_class,
)
from cosmosfl.experiment.result import SimulationResult
from cosmosfl.experiment.rundir import CHECKPOINT, CONFIG, RunDirectory
from cosmosfl.experiment.server_models import torch_server_learner
from cosmosfl.experiment.summary import summarize
from cosmosfl.experiment.tracking import Tracker, default_run_name, make_tracker
from cosmosfl.learners.base import Learner
from cosmosfl.learners.sklearn import SklearnLearner
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import IMAGE_SIZE_RANGE, build_model, model_names

if TYPE_CHECKING:
    from cosmosfl.experiment.centralized import Centralized

SKLEARN_MODELS = ("logistic_regression", "random_forest")


@dataclass
class Experiment:
    """Everything a run needs, built from a config (and inspectable before running)."""

    config: ExperimentConfig
    dataset: ImageDataset
    partition: Partition
    clients: list[Client]
    public_x: np.ndarray
    algorithm: Algorithm | Centralized  # a protocol algorithm, or a reference run
    client_models: list[str]


def client_model_names(models: dict[str, float] | list[str], num_clients: int) -> list[str]:
    """One architecture name per client id.

    A mix {name: fraction} becomes counts by largest remainder, then the names are spread
    evenly over the ids (not in blocks), so that consecutive ids — which share a class group
    in the paper split — get different architectures and group is not confounded with model.
    """
    if isinstance(models, list):
        return list(models)
    names = list(models)
    weights = np.array([models[n] for n in names], dtype=np.float64)
    exact = weights / weights.sum() * num_clients
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: num_clients - counts.sum()]] += 1
    slots = [((j + 0.5) / c, i) for i, c in enumerate(counts) for j in range(c)]
    return [names[i] for _, i in sorted(slots)]


def make_learner(
    name: str, cfg: ExperimentConfig, dataset: ImageDataset, seed: int, num_classes: int
) -> Learner:
    c = cfg.clients
    if name == "logistic_regression":
        from sklearn.linear_model import LogisticRegression

        return SklearnLearner(LogisticRegression(max_iter=300), num_classes=num_classes)
    if name == "random_forest":
        from sklearn.ensemble import RandomForestClassifier

        return SklearnLearner(
            RandomForestClassifier(n_estimators=100, random_state=seed % 2**31, n_jobs=1),
            num_classes=num_classes,
        )
    channels, size = dataset.image_shape[0], dataset.image_shape[1]
    lo, hi = IMAGE_SIZE_RANGE
    if not lo <= size <= hi:
        raise ConfigError(
            f"data.dataset = {cfg.data.dataset!r} has {size} px images; the torch model zoo "
            f"takes {lo}-{hi} px (resize the data, or use scikit-learn client models)"
        )
    net = build_model(
        name,
        in_channels=channels,
        num_classes=num_classes,
        image_size=size,
        width=c.width,
        seed=seed,
    )
    return TorchLearner(
        net,
        num_classes=num_classes,
        lr=c.lr,
        distill_lr=c.distill_lr,
        batch_size=c.batch_size,
        augmentation=default_augmentation(dataset.natural),
        device=cfg.device,
        seed=seed,
        train_augmentation=(
            train_augmentation_for(dataset.image_shape, dataset.natural)
            if c.train_augmentation
            else None
        ),
        **_shared_learner_options(cfg),
    )


def _shared_learner_options(cfg: ExperimentConfig) -> dict[str, Any]:
    """TorchLearner settings from the `clients` section that server models share."""
    c = cfg.clients
    return {
        "eval_batch_size": c.eval_batch_size,
        "consistency_samples": c.consistency_samples,
        "precision": c.precision,
        "channels_last": c.channels_last,
        "consistency_target": c.consistency_target,
        "neighbour_bn": c.neighbour_bn,
    }


def server_learner_factory(cfg: ExperimentConfig, dataset: ImageDataset) -> Any:
    """COSMOS's server models h_k, built with the `clients` section's TorchLearner settings
    (precision, |S|, r_B target, ...) and the algorithm's server_* settings."""
    a = cfg.algorithm
    return torch_server_learner(
        a["server_model"],
        width=a["server_width"],
        batch_size=a["server_batch_size"],
        distill_lr=a["server_lr"],
        augmentation=default_augmentation(dataset.natural),
        device=cfg.device,
        head_init=a["server_head_init"],
        **_shared_learner_options(cfg),
    )


def _check_model_names(names: list[str]) -> None:
    allowed = set(model_names()) | set(SKLEARN_MODELS)
    bad = sorted(set(names) - allowed)
    if bad:
        raise ConfigError(
            f"clients.models: unknown model(s) {', '.join(bad)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def check_homogeneous(algorithm: str, names: list[str]) -> None:
    """Parameter-sharing algorithms (fedavg, ditto, ...) need one torch architecture."""
    cls = ALGORITHMS.get(algorithm)
    if cls is None or cls.model_agnostic:
        return
    kinds = sorted(set(names))
    if len(kinds) > 1 or kinds[0] in SKLEARN_MODELS:
        raise ConfigError(
            f"clients.models = {', '.join(kinds)}: algorithm {algorithm} exchanges model "
            "parameters and needs every client to use the same torch architecture; give one "
            "name (e.g. clients.models: {cnn: 1.0}) or use a model-agnostic algorithm "
            f"({', '.join(sorted(n for n, c in ALGORITHMS.items() if c.model_agnostic))})"
        )


def check_clients(cfg: ExperimentConfig) -> list[str]:
    """Checks beyond the schema that need no data: client model names, and what a reference
    run (e.g. centralized) needs of the clients. Returns one architecture name per client."""
    names = client_model_names(cfg.clients.models, cfg.data.num_clients)
    _check_model_names(names)
    check_homogeneous(cfg.algorithm["name"], names)
    reference = reference_runs().get(cfg.algorithm["name"])
    if reference is not None:
        reference.check_clients(names)
    return names


def build_experiment(cfg: ExperimentConfig, clients: Collection[int] | None = None) -> Experiment:
    """Load data, partition it, and build clients and the algorithm, all seeded from cfg.seed.

    The partition and the clients depend only on the seed and the data/clients sections, never
    on the algorithm: every algorithm run with the same seed sees the same splits and the same
    initial client models. `clients` (ids) builds only those clients, each exactly as in the
    full build: a Flower node prepares its own partition and U, never another client's data.
    """
    d = cfg.data
    wanted = list(range(d.num_clients)) if clients is None else sorted(set(clients))
    outside = [c for c in wanted if not 0 <= c < d.num_clients]
    if outside:
        raise ValueError(
            f"client ids {outside} are not clients of this config (ids 0-{d.num_clients - 1})"
        )
    names = check_clients(cfg)
    dataset = load_dataset(d.dataset, d.data_dir, download=d.download)
    dataset = subsample(
        dataset, d.max_train, d.max_test, seed=derive_seed(cfg.seed, "subsample") % 2**32
    )
    options: dict[str, Any] = {
        "public_fraction": d.public_fraction,
        "test_per_client": d.test_per_client,
    }
    if d.partition == "paper":
        options.update(num_groups=d.num_groups, alpha=d.alpha, mix_fraction=d.mix_fraction)
    elif d.partition == "dirichlet":
        options.update(alpha=d.alpha)
    elif d.partition == "pathological":
        options.update(classes_per_client=d.classes_per_client)
    part = make_partition(
        d.partition,
        dataset.y_train,
        dataset.y_test,
        d.num_clients,
        seed=derive_seed(cfg.seed, "partition") % 2**32,
        **options,
    )
    # Standardise with statistics of the public set U: everyone has it, so no client's
    # private data leaks into the preprocessing of the others.
    mean, std = channel_stats(dataset.x_train[part.public])

    def train_part(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # Standardising is elementwise, so a slice prepared alone equals that slice of the
        # whole set prepared: each client's arrays are prepared from its own indices only.
        return prepare_images(dataset.x_train[idx], mean, std), dataset.y_train[idx]

    m = dataset.num_classes
    built = []
    for cid in wanted:
        tr, te = part.client_train[cid], part.client_test[cid]
        tr, va = validation_holdout(tr, d.validation_fraction, derive_seed(cfg.seed, "val", cid))
        learner = make_learner(names[cid], cfg, dataset, derive_seed(cfg.seed, "client", cid), m)
        built.append(
            Client(
                cid,
                learner,
                train_part(tr),
                (prepare_images(dataset.x_test[te], mean, std), dataset.y_test[te]),
                validation=train_part(va) if len(va) else None,
            )
        )
    options = {k: v for k, v in cfg.algorithm.items() if k != "name"}
    cls = settings_class(cfg.algorithm["name"])
    fields = set(getattr(cls, "__dataclass_fields__", {}))
    if {"server_learner", "server_model"} <= fields:
        options["server_learner"] = server_learner_factory(cfg, dataset)
    if "public_probe" in fields and part.class_groups is not None:
        options["public_probe"] = public_probe(dataset.y_train[part.public], part)
    algorithm = cls(**options)
    return Experiment(cfg, dataset, part, built, train_part(part.public)[0], algorithm, names)


def validation_holdout(
    indices: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(training, validation) indices: a seeded `fraction` of a client's private samples, at
    least one when fraction > 0 and never all of them."""
    if fraction <= 0 or len(indices) < 2:
        return indices, indices[:0]
    count = min(max(1, round(fraction * len(indices))), len(indices) - 1)
    order = np.random.default_rng(seed % 2**32).permutation(len(indices))
    return np.sort(indices[order[count:]]), np.sort(indices[order[:count]])


def public_probe(y_public: np.ndarray, part: Partition) -> Callable[..., dict[str, Any]]:
    """A measurement for COSMOS's records (paper split only): top-1 on U, with U's true labels
    that no federated party ever sees, of the cluster's teacher f̄_k, of its model h_k and of
    its members' own models, separately on the samples of U from the cluster's classes (the
    classes of its members' true groups, where the teacher knows something) and on the rest
    (where the cluster's clients can only guess)."""
    groups, class_groups = part.client_group, part.class_groups
    assert groups is not None and class_groups is not None

    def accuracy(p: np.ndarray, mask: np.ndarray) -> float | None:
        return float((p[mask].argmax(axis=1) == y_public[mask]).mean()) if mask.any() else None

    def probe(
        members: list[int], teacher: np.ndarray, h: np.ndarray, member_probs: list[np.ndarray]
    ) -> dict[str, Any]:
        classes = np.unique(np.concatenate([class_groups[int(groups[c])] for c in members]))
        inside = np.isin(y_public, classes)
        out: dict[str, Any] = {"share_in": float(inside.mean())}
        for side, mask in (("in", inside), ("out", ~inside)):
            out[f"teacher_{side}"] = accuracy(teacher, mask)
            out[f"cluster_model_{side}"] = accuracy(h, mask)
            scores = [accuracy(p, mask) for p in member_probs]
            known = [x for x in scores if x is not None]
            out[f"members_{side}"] = float(np.mean(known)) if known else None
        return out

    return probe


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


EngineFactory = Callable[[Experiment, Reporter], Any]
"""Builds the engine that runs the rounds (anything with `run_round(algorithm, t, rounds)`
returning a record), e.g. the Flower federation; the default is the in-process engine."""


def run_experiment(
    cfg: ExperimentConfig,
    out: str | Path | None = None,
    *,
    progress: bool | Reporter = True,
    force: bool = False,
    engine: EngineFactory | None = None,
    tracker: Tracker | None = None,
) -> SimulationResult:
    """Run a config end to end; with `out`, write the run directory as rounds complete, and a
    checkpoint after every round (see `resume_experiment`). `tracker` (default: the one
    cfg.tracking asks for) receives every round record."""
    run_dir = RunDirectory(Path(out)) if out is not None else None
    if run_dir is not None and run_dir.finished and not force:
        run_dir.prepare(cfg, force=False)  # raises the "already finished" error before any work
    return _execute(cfg, run_dir, progress, force=force, engine=engine, tracker=tracker)


def resume_experiment(
    out: str | Path, *, progress: bool | Reporter = True, tracker: Tracker | None = None
) -> SimulationResult:
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
    state = load_checkpoint(run_dir.path)
    if not _same_experiment(state["config"], cfg):
        raise CheckpointError(
            f"{config_path} differs from the config the checkpoint was made with; "
            "restore it, or start a new run"
        )
    return _execute(cfg, run_dir, progress, checkpoint=state, tracker=tracker)


def _same_experiment(config_text: str, cfg: ExperimentConfig) -> bool:
    """Whether a saved config (text) is `cfg`, up to what is not part of an experiment's
    identity (tracking) and up to settings added since with their defaults."""
    if config_text == dump_config(cfg):
        return True
    try:
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
) -> SimulationResult:
    start = time.perf_counter()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    if tracker is None:  # a missing tracking package fails here, before any work
        tracker = make_tracker(cfg.tracking, default_run_name(cfg, run_dir and run_dir.path))
    exp = build_experiment(cfg)  # everything is validated before the run directory is touched
    if checkpoint is not None and not isinstance(exp.algorithm, Algorithm):
        raise CheckpointError(
            f"{cfg.algorithm['name']} is a reference run without checkpoints; rerun it"
        )
    if run_dir is not None and checkpoint is None:
        run_dir.prepare(cfg, force=force)
    reporter = progress if isinstance(progress, Reporter) else make_reporter(bool(progress))
    reporter.log(
        f"{cfg.algorithm['name']} on {exp.dataset.name}: {len(exp.clients)} clients "
        f"({', '.join(sorted(set(exp.client_models)))}), |U| = {len(exp.public_x)}, "
        f"{cfg.rounds} rounds, seed {cfg.seed}"
    )
    torch.manual_seed(cfg.seed)
    done = list(checkpoint["records"]) if checkpoint is not None else []
    with tracker.session(cfg, run_dir and run_dir.path, done):
        result, summary = _run_and_summarize(
            exp, reporter, run_dir, checkpoint, engine, tracker, start
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
) -> tuple[SimulationResult, dict[str, Any]]:
    cfg = exp.config
    if isinstance(exp.algorithm, Algorithm):
        result = _run_federated(exp, exp.algorithm, reporter, run_dir, checkpoint, engine, tracker)
    else:  # a reference run (centralized): not a protocol algorithm, see centralized.py

        def on_record(record: dict[str, Any]) -> None:
            if run_dir is not None:
                run_dir.append_record(record)
            tracker.log_round(record)

        result = exp.algorithm.run(exp, cfg.rounds, reporter, on_record=on_record)
    meta = {
        "seed": cfg.seed,
        "dataset": exp.dataset.name,
        "num_clients": len(exp.clients),
        "client_models": {str(i): n for i, n in enumerate(exp.client_models)},
        "client_parameters": {str(c.id): _parameter_count(c.learner) for c in exp.clients},
        "public_size": len(exp.public_x),
        "num_classes": exp.dataset.num_classes,
        "partition": cfg.data.partition,
        "alpha": cfg.data.alpha,
    }
    summary = summarize(result, meta, wall_seconds=time.perf_counter() - start)
    if result.clusters is not None:
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
) -> SimulationResult:
    cfg = exp.config
    result = SimulationResult(algorithm.name, algorithm.primary_model)
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
    if engine_factory is not None:
        engine = engine_factory(exp, reporter)
    else:
        engine = SimulationEngine(
            exp.clients,
            exp.public_x,
            seed=cfg.seed,
            device=cfg.device,
            reporter=reporter,
            faults=cfg.faults,
            min_participation=cfg.min_participation,
            max_payload_bytes=cfg.max_payload_bytes,
            workers=cfg.workers,
        )
    config_text = dump_config(cfg)
    try:
        with reporter.running(cfg.rounds):
            for t in range(first, cfg.rounds + 1):
                record = engine.run_round(algorithm, t, cfg.rounds)
                result.records.append(record)
                if run_dir is not None:
                    run_dir.append_record(record)
                if tracker is not None:
                    tracker.log_round(record)
                if run_dir is not None and checkpointing:
                    engine.sync_clients()  # trained learners out of worker processes, if any
                    save_checkpoint(
                        run_dir.path, t, algorithm, exp.clients, result.records, config_text
                    )
    finally:
        close = getattr(engine, "close", None)
        if close is not None:
            close()
    return result


def _parameter_count(learner: Learner) -> int | None:
    """Trainable parameters of a torch client (what FedAvg would send); None otherwise."""
    model = getattr(learner, "model", None)
    if model is None:
        return None
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))
