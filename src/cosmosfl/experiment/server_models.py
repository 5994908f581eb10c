"""The server-side models an algorithm trains (COSMOS's h_k), built from the model registry as
TorchLearners. Algorithms receive such a factory (`server_learner`) and never build a model:
the experiment layer and `simulate` inject one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from cosmosfl.algorithms.base import ServerLearnerFactory
from cosmosfl.data.augment import default_augmentation
from cosmosfl.learners.base import Learner
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.init import reset_head
from cosmosfl.models.registry import build_model_for, default_model_for


def torch_server_learner(
    model: str = "auto",
    *,
    width: float = 1.0,
    batch_size: int = 32,
    distill_lr: float | None = 1e-4,
    augmentation: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
    device: str = "cpu",
    head_init: str = "kaiming",
    **learner_options: Any,
) -> ServerLearnerFactory:
    """A factory for server models h_k from the model registry (paper: VGG16, Adam 1e-4).

    `model="auto"` follows the data's kind: an mlp for feature vectors, the cnn for images.

    `learner_options` go to every TorchLearner built (e.g. `consistency_samples`, `precision`,
    `channels_last`, `eval_batch_size`, `consistency_target`, `neighbour_bn`), so server models
    train with the same settings as the clients' torch models.
    """

    def factory(sample_shape: tuple[int, ...], num_classes: int, seed: int) -> Learner:
        name = default_model_for(sample_shape) if model == "auto" else model
        net = build_model_for(name, sample_shape, num_classes=num_classes, width=width, seed=seed)
        if head_init == "default":
            reset_head(net, seed)
        return TorchLearner(
            net,
            num_classes=num_classes,
            batch_size=batch_size,
            distill_lr=1e-4 if distill_lr is None else distill_lr,  # None: the paper's
            augmentation=augmentation,
            device=device,
            seed=seed,
            **learner_options,
        )

    return factory


def server_learner_for(
    algorithm: object,
    device: str,
    *,
    natural: bool = False,
    learner_options: Mapping[str, Any] | None = None,
) -> ServerLearnerFactory | None:
    """The one rule for server models: the factory an algorithm's server_* settings describe
    (`server_model`, `server_width`, `server_batch_size`, `server_lr`, `server_head_init`), on
    `device`, with r_B's default neighbours for the data (`natural`: photos, whose flips keep
    labels) and `learner_options` (a config's `clients` settings that server models share);
    None for an algorithm that trains no registry server model."""
    if not hasattr(algorithm, "server_model") or not hasattr(algorithm, "server_learner"):
        return None
    return torch_server_learner(
        algorithm.server_model,
        width=getattr(algorithm, "server_width", 1.0),
        batch_size=getattr(algorithm, "server_batch_size", 32),
        distill_lr=getattr(algorithm, "server_lr", None),
        augmentation=default_augmentation(natural),
        device=device,
        head_init=getattr(algorithm, "server_head_init", "kaiming"),
        **(learner_options or {}),
    )


def provide_server_learner(algorithm: object, device: str) -> None:
    """Give an algorithm that trains registry server models and has no `server_learner` (as
    `simulate` receives COSMOS) the factory `server_learner_for` gives on `device`; algorithms
    without those fields, or with a factory of their own, are left as they are."""
    if getattr(algorithm, "server_learner", True) is not None:
        return
    algorithm.server_learner = server_learner_for(algorithm, device)  # type: ignore[attr-defined]
