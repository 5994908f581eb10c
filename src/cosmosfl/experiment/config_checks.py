"""The checks of a config's values beyond their types (ranges, names, combinations of settings),
run by `config_from_dict` once every section is built: each error names the field, the value
and what is allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.core.distill import CONSISTENCY_TARGETS
from cosmosfl.data.sources import DATASET_NAMES
from cosmosfl.data.tabular import MISSING_POLICIES, TABLE_SUFFIXES
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.model_spec import parse_models
from cosmosfl.experiment.schema import ExperimentConfig, SitesConfig
from cosmosfl.learners.torch import NEIGHBOUR_BN, PRECISIONS
from cosmosfl.models.registry import IMAGE_SIZE_RANGE


def check_ranges(cfg: ExperimentConfig) -> None:
    """Every value of `cfg` within its allowed range (types are checked already)."""

    def need(ok: bool, field_name: str, value: Any, allowed: str) -> None:
        if not ok:
            raise ConfigError(f"{field_name} = {value!r} is not allowed; {allowed}")

    need(cfg.rounds >= 1, "rounds", cfg.rounds, "use an integer >= 1")
    need(
        cfg.workers == "auto" or (isinstance(cfg.workers, int) and cfg.workers >= 1),
        "workers",
        cfg.workers,
        "use auto (one worker process per usable core) or an integer >= 1 (1 = serial)",
    )
    need(
        cfg.threads is None or cfg.threads >= 1,
        "threads",
        cfg.threads,
        "use an integer >= 1 or null",
    )
    need(
        0 <= cfg.min_participation <= 1,
        "min_participation",
        cfg.min_participation,
        "use a fraction in [0, 1]",
    )
    need(cfg.max_payload_bytes >= 1, "max_payload_bytes", cfg.max_payload_bytes, "use >= 1")
    need(
        cfg.device.split(":")[0] in ("cpu", "cuda", "mps", "auto"),
        "device",
        cfg.device,
        "allowed: cpu, cuda, mps, auto",
    )
    d = cfg.data
    need(
        _dataset_named(d.dataset, d.data_dir),
        "data.dataset",
        d.dataset,
        f"allowed: {', '.join(DATASET_NAMES)}, or a path to an .npz file, a table "
        f"({', '.join(TABLE_SUFFIXES)}) or a folder of images",
    )
    need(
        d.missing in MISSING_POLICIES,
        "data.missing",
        d.missing,
        f"allowed: {', '.join(MISSING_POLICIES)}",
    )
    need(
        0 < d.test_fraction < 1,
        "data.test_fraction",
        d.test_fraction,
        "use a fraction in (0, 1), e.g. 0.2",
    )
    lo, hi = IMAGE_SIZE_RANGE
    need(lo <= d.image_size <= hi, "data.image_size", d.image_size, f"use {lo}-{hi} px")
    need(
        d.label_column is None or d.label_column.strip() != "",
        "data.label_column",
        d.label_column,
        "use a column name, or null for the last column",
    )
    need(d.num_clients >= 1, "data.num_clients", d.num_clients, "use an integer >= 1")
    need(
        0 <= d.validation_fraction < 1,
        "data.validation_fraction",
        d.validation_fraction,
        "use a fraction in [0, 1) (0 = no validation slice)",
    )
    if cfg.algorithm.get("select_on_validation") and d.validation_fraction <= 0:
        raise ConfigError(
            "algorithm.select_on_validation needs a validation slice: set "
            "data.validation_fraction (e.g. 0.1) so each client holds some private data out"
        )
    need(
        d.partition in ("paper", "dirichlet", "pathological", "iid"),
        "data.partition",
        d.partition,
        "allowed: paper, dirichlet, pathological, iid",
    )
    need(d.max_train is None or d.max_train > 0, "data.max_train", d.max_train, "use > 0 or null")
    need(d.max_test is None or d.max_test > 0, "data.max_test", d.max_test, "use > 0 or null")
    t = cfg.tracking
    for name in ("tensorboard", "mlflow"):
        value = getattr(t, name)
        need(value is None or value.strip() != "", f"tracking.{name}", value, "use a path or null")
    need(t.experiment.strip() != "", "tracking.experiment", t.experiment, "use a non-empty name")
    c = cfg.clients
    need(c.width > 0, "clients.width", c.width, "use a number > 0")
    need(c.batch_size >= 1, "clients.batch_size", c.batch_size, "use an integer >= 1")
    need(c.lr > 0, "clients.lr", c.lr, "use a number > 0")
    need(c.distill_lr > 0, "clients.distill_lr", c.distill_lr, "use a number > 0")
    # The learner's own lists of choices (it checks them too), so they are written once.
    for name, allowed in (
        ("precision", PRECISIONS),
        ("consistency_target", CONSISTENCY_TARGETS),
        ("neighbour_bn", NEIGHBOUR_BN),
    ):
        value = getattr(c, name)
        need(value in allowed, f"clients.{name}", value, f"allowed: {', '.join(allowed)}")
    need(
        c.eval_batch_size >= 1,
        "clients.eval_batch_size",
        c.eval_batch_size,
        "use an integer >= 1",
    )
    need(
        c.consistency_samples >= 1,
        "clients.consistency_samples",
        c.consistency_samples,
        "use an integer >= 1",
    )
    if isinstance(c.models, list):
        need(
            len(c.models) == d.num_clients,
            "clients.models",
            c.models,
            f"a list needs exactly data.num_clients = {d.num_clients} names",
        )
    else:
        need(
            bool(c.models),
            "clients.models",
            c.models,
            "give positive fractions, e.g. {cnn: 0.5, mlp: 0.5}",
        )
    parse_models(c.models)  # names importable, arguments accepted, weights positive
    _check_sites(cfg)


def _check_sites(cfg: ExperimentConfig) -> None:
    s = cfg.sites
    if s.public is None:
        if s != SitesConfig():
            raise ConfigError(
                "sites: set sites.public (the public set U every party holds) to run sites "
                "with their own files, or remove the sites section"
            )
        return
    if s.public_sha256 is not None and not (
        len(s.public_sha256) == 64 and all(ch in "0123456789abcdefABCDEF" for ch in s.public_sha256)
    ):
        raise ConfigError(
            f"sites.public_sha256 = {s.public_sha256!r} is not a SHA-256 (64 hex digits); "
            "`sha256sum FILE` prints it, `cosmosfl flower app` fills it in"
        )
    if s.labels is not None:
        names = [str(v) for v in s.labels]
        if len(names) < 2 or len(set(names)) != len(names):
            raise ConfigError(
                f"sites.labels = {s.labels!r}: give the class names, at least 2, each once "
                "(ids follow their order)"
            )
    cls = ALGORITHMS.get(cfg.algorithm["name"])
    if cls is None or not cls.model_agnostic:
        allowed = sorted(n for n, c in ALGORITHMS.items() if c.model_agnostic)
        raise ConfigError(
            f"algorithm {cfg.algorithm['name']} cannot run on sites with their own models "
            f"and files (it needs shared parameters or pooled data); use one of {allowed}"
        )


def _dataset_named(dataset: str, data_dir: str | None) -> bool:
    """Whether `dataset` names a known dataset or looks like a path to data (a known suffix,
    a path separator, or a folder that exists); a misspelt name then fails at load time."""
    key = dataset.strip()
    if not key:
        return False
    if key.lower().replace("-", "_") in DATASET_NAMES:
        return True
    if key.lower().endswith((".npz", *TABLE_SUFFIXES)) or "/" in key or os.sep in key:
        return True
    return Path(key).expanduser().is_dir() or (
        data_dir is not None and (Path(data_dir).expanduser() / key).is_dir()
    )
