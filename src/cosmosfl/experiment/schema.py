"""The config schema: its sections as dataclasses with their defaults, the run settings and
the top-level keys, and what is part of an experiment's identity. Reading, validating and
overriding a config is config.py; the checks of values beyond their types, config_checks.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from cosmosfl.engines.faults import FaultConfig


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
    # What the config relies on that changed (a default it does not set), said in show-config
    # and the run header; not a setting, so not in to_dict.
    notices: list[str] = field(default_factory=list, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        del out["notices"]
        if self.sites == SitesConfig():  # the partition mode: configs read as before sites
            del out["sites"]
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
