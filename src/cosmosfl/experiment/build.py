"""From a config to an experiment ready to run: data, partition, client learners, the algorithm.

Building is kept apart from running (runner.py) so that whoever only needs the parties — a
Flower node building its own client, a benchmark training round-1 labels — imports none of
the run machinery (engines, checkpoints, run directories, tracking). How each part is made
(the `Experiment` record, a client's learner, the settings server models share) is in parts.py,
and a client in client_builder.py, both shared with the sites' build (sites.py), to which
`build_experiment` hands a config with `sites.public` set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.core.seeds import derive_seed
from cosmosfl.data import (
    Partition,
    PartitionError,
    load_dataset,
    make_partition,
    standardiser,
    subsample,
)
from cosmosfl.experiment.client_builder import build_client
from cosmosfl.experiment.config import ExperimentConfig, reference_runs
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.model_spec import ModelSpec, parse_models
from cosmosfl.experiment.parts import Experiment

# The parts of an experiment, made the same way for sites (sites.py); importable from here too.
from cosmosfl.experiment.parts import make_learner as make_learner
from cosmosfl.experiment.parts import validation_holdout as validation_holdout
from cosmosfl.experiment.private_clients import privatise_clients


def client_model_specs(
    models: Any, num_clients: int, specs: list[ModelSpec] | None = None
) -> list[ModelSpec]:
    """One model spec per client id (see `client_model_names` for how a mix is spread);
    `specs`: `models` parsed already (a loaded config's `clients.model_specs`)."""
    if specs is None:
        specs = parse_models(models, check=False)
    if isinstance(models, list):
        return specs
    weights = np.array([s.weight for s in specs], dtype=np.float64)
    exact = weights / weights.sum() * num_clients
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: num_clients - counts.sum()]] += 1
    slots = [((j + 0.5) / c, i) for i, c in enumerate(counts) for j in range(c)]
    return [specs[i] for _, i in sorted(slots)]


def client_model_names(models: Any, num_clients: int) -> list[str]:
    """One model name per client id, as the config writes it.

    A mix {name: fraction} becomes counts by largest remainder, then the names are spread
    evenly over the ids (not in blocks), so that consecutive ids — which share a class group
    in the paper split — get different architectures and group is not confounded with model.
    """
    return [spec.name for spec in client_model_specs(models, num_clients)]


def check_homogeneous(algorithm: str, specs: list[ModelSpec]) -> None:
    """Parameter-sharing algorithms (fedavg, ditto, ...) need one torch architecture."""
    cls = ALGORITHMS.get(algorithm)
    if cls is None or cls.model_agnostic:
        return
    kinds = sorted({s.name for s in specs})
    if len(kinds) > 1 or not specs[0].registry:
        raise ConfigError(
            f"clients.models = {', '.join(kinds)}: algorithm {algorithm} exchanges model "
            "parameters and needs every client to use the same torch architecture; give one "
            "name (e.g. clients.models: {cnn: 1.0}) or use a model-agnostic algorithm "
            f"({', '.join(sorted(n for n, c in ALGORITHMS.items() if c.model_agnostic))})"
        )


def check_clients(cfg: ExperimentConfig) -> list[str]:
    """Checks beyond the schema that need no data: client model names, and what a reference
    run (e.g. centralized) needs of the clients. Returns one model name per client."""
    return [s.name for s in checked_client_specs(cfg)]


def checked_client_specs(cfg: ExperimentConfig) -> list[ModelSpec]:
    """`check_clients`, returning one model spec per client."""
    c = cfg.clients
    specs = client_model_specs(c.models, cfg.data.num_clients, c.model_specs)
    check_homogeneous(cfg.algorithm.name, specs)
    reference = reference_runs().get(cfg.algorithm.name)
    if reference is not None:
        reference.check_clients([s.name for s in specs])
    return specs


def build_experiment(cfg: ExperimentConfig, clients: Collection[int] | None = None) -> Experiment:
    """Load data, partition it, and build clients and the algorithm, all seeded from cfg.seed.

    The partition and the clients depend only on the seed and the data/clients sections, never
    on the algorithm: every algorithm run with the same seed sees the same splits and the same
    initial client models. `clients` (ids) builds only those clients, each exactly as in the
    full build: a Flower node prepares its own partition and U, never another client's data.
    """
    if cfg.sites.public is not None:
        from cosmosfl.experiment.sites import build_sites_experiment

        return build_sites_experiment(cfg, clients)
    d = cfg.data
    wanted = list(range(d.num_clients)) if clients is None else sorted(set(clients))
    outside = [c for c in wanted if not 0 <= c < d.num_clients]
    if outside:
        raise ValueError(
            f"client ids {outside} are not clients of this config (ids 0-{d.num_clients - 1})"
        )
    specs = checked_client_specs(cfg)
    names = [s.name for s in specs]
    dataset = load_dataset(
        d.dataset,
        d.data_dir,
        download=d.download,
        label_column=d.label_column,
        test_fraction=d.test_fraction,
        missing=d.missing,
        image_size=d.image_size,
        sep=d.sep,
        encoding=d.encoding,
    )
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
    try:
        part = make_partition(
            d.partition,
            dataset.y_train,
            dataset.y_test,
            d.num_clients,
            seed=derive_seed(cfg.seed, "partition") % 2**32,
            **options,
        )
    except PartitionError as err:
        raise err.naming(dataset.classes) from None
    check_useful_sizes(part, d, len(dataset.y_train))
    # Standardising is elementwise, so a slice prepared alone equals that slice of the whole
    # set prepared: each client's arrays are prepared from its own indices only.
    prepare = standardiser(dataset.x_train[part.public])
    built = [
        build_client(
            cfg, cid, specs[cid], dataset, part.client_train[cid], part.client_test[cid], prepare
        )
        for cid in wanted
    ]
    probe = (
        public_probe(dataset.y_train[part.public], part) if part.class_groups is not None else None
    )
    # The run's copy of the algorithm built when the config was read, with the config's server
    # models for this data (photos: flips keep labels) and the U probe.
    server_models = cfg.server_models
    if server_models is not None:
        server_models = dataclasses.replace(server_models, natural=bool(dataset.natural))
    algorithm = cfg.algorithm.fresh(server_learner=server_models, public_probe=probe)
    public_x = prepare(dataset.x_train[part.public])
    privacy = privatise_clients(cfg.privacy, built, public_x, algorithm, cfg.rounds, cfg.seed)
    return Experiment(cfg, dataset, part, built, public_x, algorithm, names, privacy=privacy)


MIN_PUBLIC_ROWS = 5  # fewer samples in U: distillation targets on a handful of points
MIN_CLIENT_ROWS = 2  # fewer private training rows: a client model learns nothing


def check_useful_sizes(part: Partition, d: Any, train_rows: int) -> None:
    """Refuse a split that leaves U or a client's training data too small to learn from
    (e.g. data.test_fraction = 0.99), naming the sizes and the settings that set them."""
    sizes = {cid: len(idx) for cid, idx in enumerate(part.client_train)}
    small = {cid: n for cid, n in sizes.items() if n < MIN_CLIENT_ROWS}
    problems = []
    if len(part.public) < MIN_PUBLIC_ROWS:
        problems.append(f"|U| = {len(part.public)} rows (at least {MIN_PUBLIC_ROWS} needed)")
    if small:
        shown = ", ".join(f"client {c}: {n}" for c, n in list(small.items())[:5])
        problems.append(
            f"{len(small)} client(s) hold fewer than {MIN_CLIENT_ROWS} training rows ({shown})"
        )
    if problems:
        raise ConfigError(
            f"the data leaves too little to learn from: {'; '.join(problems)}; the dataset has "
            f"{train_rows} training rows (data.test_fraction = {d.test_fraction} of a file's "
            "rows are test rows): lower data.test_fraction, data.num_clients or "
            "data.public_fraction, or use more data"
        )


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
