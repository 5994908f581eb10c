"""The parts an experiment is made of, and how each is made from a config: the `Experiment`
record, a client's learner from its model spec (`make_learner`) and a client's validation
slice. A run's copy of the algorithm is `cfg.algorithm.fresh(...)`, with the config's
`server_models`.

Shared by the two ways of building an experiment: one partitioned dataset (build.py) and sites
that bring their own files (sites.py); neither imports the other for these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.client import Client
from cosmosfl.data import Dataset, Partition, default_augmentation, train_augmentation_for
from cosmosfl.experiment.config import ExperimentConfig
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.model_spec import ModelSpec, resolve
from cosmosfl.learners.base import Learner
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import IMAGE_SIZE_RANGE, build_model_for, model_inputs

if TYPE_CHECKING:
    from cosmosfl.experiment.references import Centralized


@dataclass
class Experiment:
    """Everything a run needs, built from a config (and inspectable before running)."""

    config: ExperimentConfig
    dataset: Dataset | None  # None: sites with their own files (experiment/sites.py)
    partition: Partition | None  # None: sites, no partition and no true class groups
    clients: list[Client]
    public_x: np.ndarray
    algorithm: Algorithm | Centralized  # a protocol algorithm, or a reference run
    client_models: list[str]
    labels: tuple[str, ...] = ()  # sites: the run's label set (else the dataset's classes)
    name: str = ""  # sites: what reports call the data (else the dataset's name)
    privacy: list[str] = field(default_factory=list)  # each client's mechanism, for the header

    @property
    def data_name(self) -> str:
        return self.dataset.name if self.dataset is not None else self.name

    @property
    def num_classes(self) -> int:
        return self.dataset.num_classes if self.dataset is not None else len(self.labels)

    @property
    def client_ids(self) -> list[int]:
        """Every client of the run: those built here, or (sites, on a server that builds
        none) the config's ids."""
        if self.dataset is None and not self.clients:
            return list(range(self.config.data.num_clients))
        return [c.id for c in self.clients]


def make_learner(
    spec: ModelSpec | str,
    cfg: ExperimentConfig,
    dataset: Dataset,
    seed: int,
    num_classes: int,
    *,
    client_id: int | None = None,
) -> Learner:
    """The learner of one client: a registry network as a TorchLearner with the `clients`
    section's settings, or what an import path (or short name) builds, wrapped in the learner
    for its framework. A model factory or class that raises is a one-line ConfigError naming
    the client and the model."""
    spec = spec if isinstance(spec, ModelSpec) else ModelSpec(spec)
    shape = dataset.sample_shape
    if not spec.registry:
        context = {
            "num_classes": num_classes,
            "seed": seed,
            "input_shape": shape,
            **({"in_features": shape[0]} if len(shape) == 1 else {}),
            **({"in_channels": shape[0], "image_size": shape[1]} if len(shape) == 3 else {}),
        }
        try:
            built = resolve(spec, context)
        except ConfigError:
            raise
        except Exception as err:  # the user's own factory or class: one line, not a traceback
            who = f"client {client_id}: " if client_id is not None else ""
            text = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise ConfigError(
                f"{who}building model {spec.name!r} raised {type(err).__name__}"
                f"{': ' + text if text else ''}; fix its arguments in clients.models (or the "
                "factory itself), then check it with cosmosfl.testing.check_learner"
            ) from None
        return as_learner(built, spec.name, cfg, dataset, seed, num_classes)
    if dataset.kind not in model_inputs(spec.name):
        raise ConfigError(
            f"clients.models: {spec.name} takes images, and data.dataset = "
            f"{cfg.data.dataset!r} holds feature vectors; use mlp, a model by import path, "
            "or an estimator (e.g. logistic_regression, hist_gradient_boosting)"
        )
    if dataset.kind == "images":
        size = dataset.image_shape[1]
        lo, hi = IMAGE_SIZE_RANGE
        if not lo <= size <= hi:
            raise ConfigError(
                f"data.dataset = {cfg.data.dataset!r} has {size} px images; the torch model zoo "
                f"takes {lo}-{hi} px (resize the data, or use scikit-learn client models)"
            )
    net = build_model_for(
        spec.name, shape, num_classes=num_classes, width=cfg.clients.width, seed=seed
    )
    return torch_learner(net, cfg, dataset, seed, num_classes)


def torch_learner(
    net: Any, cfg: ExperimentConfig, dataset: Dataset, seed: int, num_classes: int
) -> TorchLearner:
    """A client network as a TorchLearner with the `clients` section's settings."""
    c = cfg.clients
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
            if c.train_augmentation and dataset.kind == "images"
            else None
        ),
        **c.shared_learner_options(),
    )


def as_learner(
    built: Any, name: str, cfg: ExperimentConfig, dataset: Dataset, seed: int, num_classes: int
) -> Learner:
    """What a model spec built, as a Learner: learners as they are, torch modules in a
    TorchLearner, estimators with `predict_proba` in the learner for their framework."""
    from torch import nn

    if isinstance(built, Learner):
        if built.num_classes != num_classes:
            raise ConfigError(
                f"clients.models.{name} built a learner for {built.num_classes} classes; the "
                f"data has {num_classes}: build it with the num_classes argument it is given"
            )
        return built
    if isinstance(built, nn.Module):
        return torch_learner(built, cfg, dataset, seed, num_classes)
    if hasattr(built, "predict_proba") and hasattr(built, "fit"):
        from cosmosfl.learners import learner_for_estimator

        return learner_for_estimator(built, num_classes=num_classes, seed=seed)
    raise ConfigError(
        f"clients.models.{name} built a {type(built).__name__}, which is not a model cosmosfl "
        "can train: return a cosmosfl Learner, a torch nn.Module, or an estimator with fit and "
        "predict_proba"
    )


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
