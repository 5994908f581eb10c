"""The server-side models an algorithm trains (COSMOS's h_k), built from the model registry as
TorchLearners. Algorithms receive such a factory (`server_learner`) and never build a model:
the experiment layer and `simulate` inject one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from cosmosfl.algorithms.base import ServerLearnerFactory
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


def provide_server_learner(algorithm: object, device: str) -> None:
    """Give an algorithm that trains registry server models (it has `server_model` and an unset
    `server_learner`, like COSMOS) the factory its server_* settings describe, on `device`.
    Algorithms without those fields, or with a factory of their own, are left as they are."""
    if getattr(algorithm, "server_learner", True) is not None:
        return
    if not hasattr(algorithm, "server_model"):
        return
    algorithm.server_learner = torch_server_learner(  # type: ignore[attr-defined]
        algorithm.server_model,
        width=getattr(algorithm, "server_width", 1.0),
        batch_size=getattr(algorithm, "server_batch_size", 32),
        distill_lr=getattr(algorithm, "server_lr", None),
        device=device,
        head_init=getattr(algorithm, "server_head_init", "kaiming"),
    )
