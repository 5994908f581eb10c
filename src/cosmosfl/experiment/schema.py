"""The config schema: its sections as dataclasses with their defaults and what each value
allows, the run settings and the top-level keys, and what is part of an experiment's identity.
Reading, validating and overriding a config is config.py.

Each section declares its values' constraints in `parameter_constraints` and its checks of
several values together in `parameter_rules`, in core/constraints.py's vocabulary (as the
algorithms and `FaultConfig` do); `config.check_values` runs them once every section is built,
and a violation names the dotted key, the value and what to set instead. A value that
TorchLearner also takes (`clients.lr`, batch sizes, precision, ...) has one constraint object,
`LEARNER_CONSTRAINTS`, declared by both.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.core.constraints import Custom, Interval, Options, Rule
from cosmosfl.data.sources import DATASET_NAMES
from cosmosfl.data.tabular import MISSING_POLICIES, TABLE_SUFFIXES
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.experiment.algorithm_section import AlgorithmSection, validate_algorithm
from cosmosfl.experiment.model_spec import ModelSpec
from cosmosfl.experiment.server_models import TorchServerModels, server_models_for
from cosmosfl.learners.torch import LEARNER_CONSTRAINTS
from cosmosfl.models.registry import IMAGE_SIZE_RANGE
from cosmosfl.privacy.settings import PrivacyConfig

PARTITIONS = ("paper", "dirichlet", "pathological", "iid")
DEVICE_KINDS = ("cpu", "cuda", "mps", "auto")  # a device may name an index: cuda:1
# The clients' TorchLearner settings server models share, to train as the clients' models do.
SHARED_WITH_SERVER_MODELS = (
    "eval_batch_size",
    "consistency_samples",
    "precision",
    "channels_last",
    "consistency_target",
    "neighbour_bn",
)


def _text(advice: str, null: bool = True) -> Custom:
    """A non-blank string (or null, if `null`)."""
    return Custom(
        lambda v: (null and v is None) or (isinstance(v, str) and v.strip() != ""), advice
    )


def _fraction(low: float, high: float, closed: str, note: str = "") -> Interval:
    return Interval(float, low, high, closed=closed, noun="a fraction", note=note)


def _gates_clients(algorithm: AlgorithmSection) -> bool:
    """Whether the algorithm asks its clients to gate on a validation slice (COSMOS's
    `client_gate_used`: its `client_gate`, or its recipe's)."""
    return bool(getattr(algorithm.built, "client_gate_used", False))


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


@dataclass
class DataConfig:
    parameter_constraints: ClassVar = {
        "missing": Options(MISSING_POLICIES),
        "test_fraction": _fraction(0, 1, "neither", note="e.g. 0.2"),
        "image_size": Interval(int, *IMAGE_SIZE_RANGE, note="pixels"),
        "label_column": _text("use a column name, or null for the last column"),
        "sep": _text("a one-character separator such as ';', or null to sniff it"),
        "encoding": _text("e.g. utf-8, latin-1, cp1252, or null for UTF-8"),
        "num_clients": Interval(int, 1),
        "validation_fraction": _fraction(0, 1, "left", note="0 = no validation slice"),
        "partition": Options(PARTITIONS),
        "max_train": Interval(int, 0, closed="neither", none="all"),
        "max_test": Interval(int, 0, closed="neither", none="all"),
    }
    parameter_rules: ClassVar = [
        Rule(
            lambda d: _dataset_named(d.dataset, d.data_dir),
            lambda d: (
                f"data.dataset = {d.dataset!r} is not allowed; allowed: "
                f"{', '.join(DATASET_NAMES)}, or a path to an .npz file, a table "
                f"({', '.join(TABLE_SUFFIXES)}) or a folder of images"
            ),
        )
    ]
    # digits | cifar10 | cifar100 | mnist | fashion_mnist | emnist_balanced | tiny_imagenet,
    # or a path: an .npz file (images or feature vectors), a CSV / Parquet table, or a folder
    # of images with one subfolder per class. Relative paths are also looked up in data_dir.
    dataset: str = "digits"
    data_dir: str | None = None  # folder of data files (or env COSMOSFL_DATA_DIR)
    # Tables: the label column (null: the last column), and what to do with missing feature
    # values: "refuse" (an error naming the columns) or "impute" (U's mean, after scaling).
    label_column: str | None = None
    missing: str = "refuse"
    # Text tables: the separator (null: `,` for .csv, a tab for .tsv, or sniffed from a
    # header that reads as one column) and the encoding (null: UTF-8).
    sep: str | None = None
    encoding: str | None = None
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
    # algorithm alike, so runs stay paired); never trained on, only read to decide (COSMOS's
    # client gate and select_on_validation). 0 = none. 0.1 since 0.4 (was 0).
    validation_fraction: float = 0.1


@dataclass
class ClientsConfig:
    parameter_constraints: ClassVar = {
        "width": Interval(float, 0, closed="neither"),
        # TorchLearner's own constraint objects: each rule is written once, in learners/torch.py.
        **LEARNER_CONSTRAINTS,
        "models": Custom(
            lambda m: isinstance(m, list) or bool(m),
            "give positive fractions, e.g. {cnn: 0.5, mlp: 0.5}",
        ),
    }
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
    # `models` parsed and checked, once, when the config is read (config.check_values); not a
    # key of the section.
    model_specs: list[ModelSpec] | None = field(default=None, init=False, compare=False, repr=False)

    def shared_learner_options(self) -> dict[str, Any]:
        """The TorchLearner settings server models share with the clients' torch models."""
        return {name: getattr(self, name) for name in SHARED_WITH_SERVER_MODELS}


@dataclass
class SitesConfig:
    parameter_constraints: ClassVar = {
        "public_sha256": Custom(
            lambda v: (
                v is None or (len(v) == 64 and all(ch in "0123456789abcdefABCDEF" for ch in v))
            ),
            "",
            message="{key} = {value!r} is not a SHA-256 (64 hex digits); `sha256sum FILE` "
            "prints it, `cosmosfl flower app` fills it in",
        ),
        "labels": Custom(
            lambda v: v is None or (len(v) >= 2 and len({str(x) for x in v}) == len(v)),
            "",
            message="{key} = {value!r}: give the class names, at least 2, each once "
            "(ids follow their order)",
        ),
    }
    parameter_rules: ClassVar = [
        Rule(
            lambda s: s.public is not None or s == SitesConfig(),
            lambda s: (
                "sites: set sites.public (the public set U every party holds) to run "
                "sites with their own files, or remove the sites section"
            ),
        )
    ]
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
    parameter_constraints: ClassVar = {
        "tensorboard": _text("use a path or null"),
        "mlflow": _text("use a path or null"),
        "experiment": _text("use a non-empty name", null=False),
    }
    # Experiment tracking (experiment/tracking.py), off by default. Where a run is logged is
    # not what it computes: this section is left out of an experiment's identity (NOT_IDENTITY).
    tensorboard: str | None = None  # TensorBoard log folder; each run logs into a subfolder
    mlflow: str | None = None  # MLflow tracking URI, a path to a .db file, or "default"
    experiment: str = "cosmosfl"  # MLflow experiment the runs are logged under


def _privacy_algorithm_ok(cfg: ExperimentConfig) -> bool:
    """Under privacy, clients may run only the model-agnostic tasks (handlers/default.py):
    their private records are then read by `fit` alone, the fit the accountant charges."""
    built = cfg.algorithm.built
    return not cfg.privacy.enabled or (
        isinstance(built, Algorithm) and built.client_handlers is None
    )


def _private_only_in_fits(cfg: ExperimentConfig) -> bool:
    """Under privacy, nothing but a fit reads private records: no validation slice (model
    selection on it is not accounted), no label-prior weights (the private label histogram)."""
    return not cfg.privacy.enabled or (
        cfg.data.validation_fraction == 0
        and getattr(cfg.algorithm.built, "client_weights", "uniform") != "label-prior"
    )


def _guarantee_met(cfg: ExperimentConfig) -> bool:
    """Partition mode: every client has the run's budget, so require_epsilon needs epsilon
    (sites mode checks each site's own, experiment/sites.py)."""
    p = cfg.privacy
    return p.require_epsilon is None or cfg.sites.public is not None or p.epsilon is not None


def _sites_algorithm_ok(cfg: ExperimentConfig) -> bool:
    built = cfg.algorithm.built
    return cfg.sites.public is None or (isinstance(built, Algorithm) and built.model_agnostic)


@dataclass
class ExperimentConfig:
    # The run settings; the sections declare their own (config.check_values runs them all).
    parameter_constraints: ClassVar = {
        "rounds": Interval(int, 1),
        "workers": Custom(
            lambda w: w == "auto" or (isinstance(w, int) and w >= 1),
            "use auto (one worker process per usable core) or an integer >= 1 (1 = serial)",
        ),
        "threads": Interval(int, 1, none=""),
        "min_participation": _fraction(0, 1, "both"),
        "max_payload_bytes": Interval(int, 1),
        "device": Custom(
            lambda d: d.split(":")[0] in DEVICE_KINDS, f"allowed: {', '.join(DEVICE_KINDS)}"
        ),
    }
    # Checks across sections, run after every section's own.
    parameter_rules: ClassVar = [
        Rule(
            lambda c: not _gates_clients(c.algorithm) or c.data.validation_fraction > 0,
            lambda c: (
                "COSMOS's client gate (algorithm.client_gate, on by default with recipe "
                "validated) judges each distillation step on a validation slice: set "
                "data.validation_fraction > 0 (default 0.1), or algorithm.client_gate: none, or "
                "algorithm.recipe: paper"
            ),
        ),
        Rule(
            lambda c: (
                not getattr(c.algorithm.built, "select_on_validation", False)
                or c.data.validation_fraction > 0
            ),
            lambda c: (
                "algorithm.select_on_validation needs a validation slice: set "
                "data.validation_fraction (e.g. 0.1) so each client holds some private data out"
            ),
        ),
        Rule(
            lambda c: (
                not isinstance(c.clients.models, list)
                or len(c.clients.models) == c.data.num_clients
            ),
            lambda c: (
                f"clients.models = {c.clients.models!r} is not allowed; a list needs "
                f"exactly data.num_clients = {c.data.num_clients} names"
            ),
        ),
        Rule(
            _sites_algorithm_ok,
            lambda c: (
                f"algorithm {c.algorithm.name} cannot run on sites with their own "
                "models and files (it needs shared parameters or pooled data); use one of "
                f"{sorted(n for n, a in ALGORITHMS.items() if a.model_agnostic)}"
            ),
        ),
        Rule(
            _privacy_algorithm_ok,
            lambda c: (
                f"privacy: algorithm {c.algorithm.name} is not supported under differential "
                "privacy (its clients do more than fit, predict on U and distil); use one of "
                f"{sorted(n for n, a in ALGORITHMS.items() if a.client_handlers is None)}"
            ),
        ),
        Rule(
            _private_only_in_fits,
            lambda c: (
                "privacy: set data.validation_fraction = 0 (its default is 0.1), "
                "algorithm.client_weights = uniform and, for COSMOS, algorithm.client_gate = "
                "none (or algorithm.recipe = paper); under differential privacy only the "
                "accounted fits may read private records (docs/privacy.md)"
            ),
        ),
        Rule(
            _guarantee_met,
            lambda c: (
                f"privacy.require_epsilon = {c.privacy.require_epsilon!r} needs privacy.epsilon "
                "(at most that) for every client of a partition-mode run"
            ),
        ),
    ]

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
    # The algorithm, built and checked once (algorithm_section.py); reads as its settings.
    algorithm: AlgorithmSection = field(
        default_factory=lambda: validate_algorithm({"name": "cosmos"})
    )
    faults: FaultConfig = field(default_factory=FaultConfig)  # injected faults (none by default)
    sites: SitesConfig = field(default_factory=SitesConfig)  # sites with their own files
    tracking: TrackingConfig = field(default_factory=TrackingConfig)  # TensorBoard / MLflow
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)  # differential privacy
    # What the config relies on that changed (a default it does not set), said in show-config
    # and the run header; not a setting, so not in to_dict.
    notices: list[str] = field(default_factory=list, compare=False, repr=False)
    # The server models (COSMOS's h_k) the algorithm's server_* settings describe, on `device`,
    # with the clients' shared TorchLearner settings: decided with the config, so a run only
    # sets its data's `natural`; derived from the settings (again by `dataclasses.replace`),
    # so not a setting and not in to_dict. None: the algorithm trains no registry model.
    server_models: TorchServerModels | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.server_models = server_models_for(
            self.algorithm.built, self.device, learner_options=self.clients.shared_learner_options()
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        del out["notices"]
        del out["server_models"]
        out["algorithm"] = dict(self.algorithm)
        del out["clients"]["model_specs"]
        if self.sites == SitesConfig():  # the partition mode: configs read as before sites
            del out["sites"]
        if self.privacy == PrivacyConfig():  # no privacy: configs read as before the section
            del out["privacy"]
        return out
