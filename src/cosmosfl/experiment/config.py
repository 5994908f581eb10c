"""The experiment config: schema, defaults, validation and `key=value` overrides.

A config is three sections (`data`, `clients`, `algorithm`) plus run settings. Every key is
checked before any training starts: unknown keys and bad values are rejected with the field,
the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.algorithms.registry import ALGORITHMS, algorithm_class
from cosmosfl.core.constraints import check_parameters
from cosmosfl.core.distill import CONSISTENCY_TARGETS
from cosmosfl.data.sources import DATASET_NAMES
from cosmosfl.data.tabular import MISSING_POLICIES, TABLE_SUFFIXES
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.model_spec import parse_models
from cosmosfl.experiment.references import REFERENCE_RUNS
from cosmosfl.learners.torch import NEIGHBOUR_BN, PRECISIONS
from cosmosfl.models.registry import IMAGE_SIZE_RANGE


@dataclass
class DataConfig:
    # digits | cifar10 | cifar100 | mnist | fashion_mnist | emnist_balanced | tiny_imagenet,
    # or a path: an .npz file (images or feature vectors), a CSV / Parquet table, or a folder
    # of images with one subfolder per class. Relative paths are also looked up in data_dir.
    dataset: str = "digits"
    data_dir: str | None = None  # folder of data files (or env COSMOSFL_DATA_DIR)
    # Tables: the label column (null: the last column), and what to do with missing feature
    # values: "refuse" (an error naming the columns) or "impute" (U's mean, after scaling).
    label_column: str | None = None
    missing: str = "refuse"
    # Files without a test split (tables, image folders): this stratified fraction of the rows
    # becomes the test set, drawn with a fixed seed (the split belongs to the data, not a run).
    test_fraction: float = 0.2
    image_size: int = 32  # image folders: every image is resized to this square size (8-64)
    download: bool = False  # allow torchvision downloads when the data is not found locally
    partition: str = "paper"  # paper | dirichlet | pathological | iid
    num_clients: int = 10
    num_groups: int = 5  # paper split: disjoint class groups
    alpha: float = 5.0  # Dirichlet concentration (paper split and plain Dirichlet)
    mix_fraction: float = 0.1  # paper split: share of each client's samples pooled and dealt back
    public_fraction: float = 0.2  # |U| as a fraction of the training data (labels withheld)
    classes_per_client: int = 2  # pathological split
    test_per_client: int | None = None  # default: len(test) // num_clients
    max_train: int | None = None  # stratified training subset before partitioning (None = all)
    max_test: int | None = None  # stratified test subset (None = all)
    # Share of each client's private training data held out as its validation slice (for every
    # algorithm alike, so runs stay paired); only model selection reads it (COSMOS's
    # select_on_validation), never training. 0 = none.
    validation_fraction: float = 0.0


@dataclass
class ClientsConfig:
    # Client models: {name: fraction} (interleaved across ids), {name: {weight: fraction,
    # **arguments}}, or a list with one name (or {name: {arguments}}) per client. Names: the
    # model registry (mlp, cnn, alexnet, resnet18, mobilenetv2, squeezenet, vgg16, ...), short
    # names (logistic_regression, random_forest, knn, hist_gradient_boosting, xgboost,
    # lightgbm), or any class / factory by import path (experiment/model_spec.py).
    models: dict[str, float | dict[str, Any]] | list[str | dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {"mlp": 1.0}
    )
    width: float = 1.0  # channel-width multiplier of torch models
    batch_size: int = 32
    lr: float = 1e-3  # Adam on true labels
    distill_lr: float = 1e-4  # Adam on pseudo-labels
    eval_batch_size: int = 128
    consistency_samples: int = 1  # |S|, neighbours per point in r_B
    # Fast path (docs/performance.md): "fp32" (exact reference) or "bf16" autocast; NHWC layout.
    precision: str = "fp32"
    channels_last: bool = False
    # r_B's clean prediction: "live" (gradients through both views, the paper as written) or
    # "detached" (a fixed target, as in most consistency regularisers). Server models too.
    consistency_target: str = "live"
    # BatchNorm running statistics during r_B's neighbour pass: "update" or "frozen" (kept
    # from clean inputs only). Server models too.
    neighbour_bn: str = "update"
    # Random crop + flip (flip for natural images only) of private training batches, for every
    # algorithm alike; no effect on images under 16 px (digits) or non-images.
    train_augmentation: bool = False


@dataclass
class SitesConfig:
    # Sites that bring their own data and models (experiment/sites.py, docs/tutorials/
    # organisations.md): set `public` and each site reads its own file, named in its site file.
    # Unset (the default): every party's data comes from data.dataset and the partition seed.
    public: str | None = None  # U, a table or .npz every party holds (relative: cwd, data_dir)
    public_sha256: str | None = None  # U's SHA-256: a party holding another U is refused
    labels: list[str] | None = None  # the label set, class names with ids by position
    label_column: str | None = None  # the sites' label column (a site file may name its own)
    files: list[str] = field(default_factory=list)  # site files, id = position (in-process)


@dataclass
class TrackingConfig:
    # Experiment tracking (experiment/tracking.py), off by default. Where a run is logged is
    # not what it computes: this section is left out of an experiment's identity (NOT_IDENTITY).
    tensorboard: str | None = None  # TensorBoard log folder; each run logs into a subfolder
    mlflow: str | None = None  # MLflow tracking URI, a path to a .db file, or "default"
    experiment: str = "cosmosfl"  # MLflow experiment the runs are logged under


@dataclass
class ExperimentConfig:
    seed: int = 1
    rounds: int = 10
    device: str = "cpu"  # cpu | cuda | mps | auto
    # torch CPU threads per process (None: 1 with worker processes, workers "auto" included,
    # which makes records independent of the machine; torch's default with workers: 1).
    threads: int | None = None
    # A step of a round answered by fewer than this fraction of the clients it addressed ends
    # the run with an error instead of training on too little.
    min_participation: float = 0.5
    max_payload_bytes: int = 1 << 30  # larger payloads are rejected (the sender is excluded)
    # Client worker processes: "auto" one per usable core (cores // threads), at most one
    # per client, serial on one core; 1 serial, in-process; N exactly N (engines/workers.py).
    workers: int | str = "auto"
    data: DataConfig = field(default_factory=DataConfig)
    clients: ClientsConfig = field(default_factory=ClientsConfig)
    algorithm: dict[str, Any] = field(default_factory=lambda: {"name": "cosmos"})
    faults: FaultConfig = field(default_factory=FaultConfig)  # injected faults (none by default)
    sites: SitesConfig = field(default_factory=SitesConfig)  # sites with their own files
    tracking: TrackingConfig = field(default_factory=TrackingConfig)  # TensorBoard / MLflow

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.sites == SitesConfig():  # the partition mode: configs read as before sites
            del out["sites"]
        return out


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is dict:
        kt, vt = typing.get_args(hint)
        return isinstance(value, dict) and all(
            _type_ok(k, kt) and _type_ok(v, vt) for k, v in value.items()
        )
    if origin is list:
        (it,) = typing.get_args(hint)
        return isinstance(value, list) and all(_type_ok(v, it) for v in value)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _check_keys(raw: dict[Any, Any], where: str) -> None:
    """Keys must be strings (YAML also makes ints, nulls and booleans of bare keys)."""
    odd = [k for k in raw if not isinstance(k, str)]
    if odd:
        raise ConfigError(f"keys in {where} must be names, got {', '.join(map(repr, odd))}")


def _as_number(value: Any, hint: Any, field_name: str) -> Any:
    """`value` as a float where `hint` allows a float and it is a number (ints too); refuses
    NaN, infinities and ints beyond float range, which no setting means."""
    if float not in (typing.get_args(hint) or (hint,)):
        return value
    if not isinstance(value, int | float) or isinstance(value, bool):
        return value
    try:
        number = float(value)
    except OverflowError:
        raise ConfigError(f"{field_name} = {value} is too large for a number") from None
    if not math.isfinite(number):
        raise ConfigError(f"{field_name} = {value!r} must be a finite number")
    return number


def _build(cls: type, raw: Any, where: str) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping of keys to values, got {raw!r}")
    _check_keys(raw, where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(f'{where}.{k}' for k in unknown)}; "
            f"allowed in {where}: {', '.join(names)}"
        )
    values = {}
    for name, value in raw.items():
        hint = hints[name]
        value = _as_number(value, hint, f"{where}.{name}")
        if not _type_ok(value, hint):
            raise ConfigError(f"{where}.{name} = {value!r} must be of type {_type_name(hint)}")
        values[name] = value
    return cls(**values)


def reference_runs() -> dict[str, type]:
    """Runs accepted in `algorithm.name` that are not federated algorithms (e.g. centralized).

    They are reported beside the algorithms but are not in the algorithm registry, because they
    may do what no protocol may (the centralized reference pools private data); see
    experiment/references.py.
    """
    return dict(REFERENCE_RUNS)


def _allowed_names() -> str:
    return (
        f"{', '.join(sorted(ALGORITHMS))}; "
        f"reference runs (not federated): {', '.join(sorted(reference_runs()))}"
    )


def settings_class(name: str) -> type:
    """The class whose fields are the settings of `algorithm.name` (algorithm or reference run)."""
    if not isinstance(name, str):
        raise ConfigError(f"algorithm.name = {name!r} must be a name; allowed: {_allowed_names()}")
    if name in ALGORITHMS:
        return algorithm_class(name)
    references = reference_runs()
    if name in references:
        return references[name]
    raise ConfigError(f"algorithm.name = {name!r} is not known; allowed: {_allowed_names()}")


def algorithm_options(name: str) -> dict[str, dataclasses.Field]:
    """The config-settable hyperparameters of an algorithm (its init fields with plain types)."""
    cls = settings_class(name)
    hints = typing.get_type_hints(cls)
    settable = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        if _type_ok_for_config(hints[f.name]):
            settable[f.name] = f
    return settable


def _type_ok_for_config(hint: Any) -> bool:
    args = typing.get_args(hint) or (hint,)
    return all(a in (int, float, str, bool, type(None)) for a in args)


def validate_algorithm(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or "name" not in raw:
        raise ConfigError(f"algorithm must be a mapping with a 'name' (one of {_allowed_names()})")
    _check_keys(raw, "algorithm")
    name = raw["name"]
    cls = settings_class(name)
    raw = _renamed_keys(cls, name, raw)
    options = algorithm_options(name)
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(raw) - set(options) - {"name"})
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join('algorithm.' + k for k in unknown)} for {name}; "
            f"allowed: {', '.join(sorted(options))}"
        )
    out: dict[str, Any] = {"name": name}
    for key, value in raw.items():
        if key == "name":
            continue
        hint = hints[key]
        value = _as_number(value, hint, f"algorithm.{key}")
        if not _type_ok(value, hint):
            raise ConfigError(f"algorithm.{key} = {value!r} must be of type {_type_name(hint)}")
        out[key] = value
    given = {k: v for k, v in out.items() if k != "name"}
    try:
        # Each value against the class's declared constraints (core/constraints.py), then the
        # algorithm itself for combinations of settings, all before any training.
        check_parameters(cls, given)
        instance = cls(**given)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"algorithm ({name}): {err}") from None
    # The resolved config names every setting, defaults included, so a run directory's
    # config.yaml reproduces the run even if a default changes later.
    return {"name": name, **{key: getattr(instance, key) for key in options}}


def _renamed_keys(cls: type, name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with deprecated setting names (the class's `renamed_parameters`) replaced by the
    current ones, each with a DeprecationWarning; both names at once is an error."""
    renamed = getattr(cls, "renamed_parameters", {})
    if not any(key in renamed for key in raw):
        return raw
    out = {}
    for key, value in raw.items():
        new = renamed.get(key)
        if new is None:
            out[key] = value
            continue
        if new in raw:
            raise ConfigError(
                f"algorithm.{key} and algorithm.{new} are one setting of {name} ({key} is its "
                f"deprecated name); set only algorithm.{new}"
            )
        warnings.warn(
            f"algorithm.{key} of {name} is deprecated; use algorithm.{new} (same meaning)",
            DeprecationWarning,
            stacklevel=4,  # _renamed_keys <- validate_algorithm <- config_from_dict <- caller
        )
        out[new] = value
    return out


RUN_SETTINGS = (
    "seed",
    "rounds",
    "device",
    "threads",
    "workers",
    "min_participation",
    "max_payload_bytes",
)
TOP_LEVEL = (*RUN_SETTINGS, "data", "clients", "algorithm", "faults", "tracking", "sites")
# Sections that say where a run is logged, not what it computes: a finished run whose config
# differs only here is the same experiment (compare/sweep skip it) and can be resumed.
NOT_IDENTITY = ("tracking",)


def identity(cfg: ExperimentConfig | dict[str, Any]) -> dict[str, Any]:
    """The config as plain data without the sections of NOT_IDENTITY."""
    raw = cfg.to_dict() if isinstance(cfg, ExperimentConfig) else dict(cfg)
    return {k: v for k, v in raw.items() if k not in NOT_IDENTITY}


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config data as dotted keys (`data.num_clients`); `clients.models` stays whole."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and name != "clients.models":
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def config_from_dict(raw: dict[str, Any]) -> ExperimentConfig:
    """Validate a plain dict (e.g. parsed YAML) into an ExperimentConfig."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a mapping, got {type(raw).__name__}")
    _check_keys(raw, "the config")
    unknown = sorted(set(raw) - set(TOP_LEVEL))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TOP_LEVEL)}")
    top = _build(
        ExperimentConfig,
        {k: v for k, v in raw.items() if k in RUN_SETTINGS},
        "config",
    )
    try:
        top.faults = _build(FaultConfig, raw.get("faults"), "faults")
    except (TypeError, ValueError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(str(err)) from None
    top.data = _build(DataConfig, raw.get("data"), "data")
    top.tracking = _build(TrackingConfig, raw.get("tracking"), "tracking")
    top.clients = _build(ClientsConfig, raw.get("clients"), "clients")
    top.sites = _build(SitesConfig, raw.get("sites"), "sites")
    if top.sites.files:  # one client per site file
        given = (raw.get("data") or {}).get("num_clients")
        if given is not None and given != len(top.sites.files):
            raise ConfigError(
                f"data.num_clients = {given} and sites.files lists {len(top.sites.files)} "
                "sites; leave num_clients out (it follows the files)"
            )
        top.data.num_clients = len(top.sites.files)
    if isinstance(top.clients.models, dict):
        # By name, as a mapping read from a file already is (apply_overrides round-trips it
        # through sorted YAML): the same mix then gives the same clients whether it came from a
        # file, an override or a run directory's config.yaml (which resume rebuilds from).
        top.clients.models = dict(sorted(top.clients.models.items()))
    algorithm = raw.get("algorithm") or {}
    if isinstance(algorithm, dict) and "name" not in algorithm:
        algorithm = {"name": "cosmos", **algorithm}  # the default algorithm, e.g. for overrides
    top.algorithm = validate_algorithm(algorithm)
    _check_ranges(top)
    return top


def _check_ranges(cfg: ExperimentConfig) -> None:
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


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b=value` -> (["a", "b"], parsed YAML value)."""
    if "=" not in text:
        raise ConfigError(
            f"override {text!r} must look like key=value (e.g. rounds=3, algorithm.lam=1)"
        )
    key, _, value = text.partition("=")
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError(f"override {text!r} has an empty key")
    if not value.strip():
        return path, None
    try:
        return path, yaml.safe_load(value)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({problem})") from None


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    out = yaml.safe_load(yaml.safe_dump(raw)) or {}  # deep copy of plain data
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {part} is not a section")
        node[path[-1]] = value
    return out


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None
) -> ExperimentConfig:
    """Read a YAML config (or start from the defaults), apply overrides, validate."""
    raw = read_config_file(path) if path is not None else {}
    return config_from_dict(apply_overrides(raw, overrides or []))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The YAML of a config file as plain data (not yet validated)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text ({err.reason})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(p)!r} is not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping, got {type(raw).__name__}")
    return raw


def dump_config(cfg: ExperimentConfig) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
