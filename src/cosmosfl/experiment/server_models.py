"""The server-side models an algorithm trains (COSMOS's h_k), built from the model registry as
TorchLearners. Algorithms receive such a factory (`server_learner`) and never build a model:
the experiment layer and `simulate` inject one.

The factory is a value, `TorchServerModels`: frozen settings that build an h_k when called.
A value, not a closure, so that a config can carry it (`ExperimentConfig.server_models`,
decided when the config is read), a run can change one setting of it (the data's `natural`)
with `dataclasses.replace`, and it pickles and prints like the settings it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from cosmosfl.data.augment import default_augmentation
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.init import reset_head
from cosmosfl.models.registry import build_model_for, default_model_for


@dataclass(frozen=True)
class TorchServerModels:
    """Server models h_k from the model registry (paper: VGG16, Adam 1e-4), as a
    `ServerLearnerFactory`: called with (sample_shape, num_classes, seed), it builds one.

    `model="auto"` follows the data's kind: an mlp for feature vectors, the cnn for images.
    `natural`: the data are photos, whose flips keep labels (r_B's default neighbours then
    flip); `augmentation`: neighbours of one's own instead. `learner_options` go to every
    TorchLearner built (e.g. `consistency_samples`, `precision`, `channels_last`,
    `eval_batch_size`, `consistency_target`, `neighbour_bn`), so server models train with the
    same settings as the clients' torch models.
    """

    model: str = "auto"
    width: float = 1.0
    batch_size: int = 32
    distill_lr: float | None = 1e-4  # None: the paper's 1e-4
    head_init: str = "kaiming"
    device: str = "cpu"
    natural: bool = False
    augmentation: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None
    learner_options: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, sample_shape: tuple[int, ...], num_classes: int, seed: int) -> TorchLearner:
        name = default_model_for(sample_shape) if self.model == "auto" else self.model
        net = build_model_for(
            name, sample_shape, num_classes=num_classes, width=self.width, seed=seed
        )
        if self.head_init == "default":
            reset_head(net, seed)
        return TorchLearner(
            net,
            num_classes=num_classes,
            batch_size=self.batch_size,
            distill_lr=1e-4 if self.distill_lr is None else self.distill_lr,
            augmentation=(
                self.augmentation
                if self.augmentation is not None
                else default_augmentation(self.natural)
            ),
            device=self.device,
            seed=seed,
            **self.learner_options,
        )


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
) -> TorchServerModels:
    """A factory for server models h_k from the model registry (paper: VGG16, Adam 1e-4): the
    `TorchServerModels` of these settings (see there); `augmentation` None: r_B's defaults."""
    return TorchServerModels(
        model,
        width=width,
        batch_size=batch_size,
        distill_lr=distill_lr,
        head_init=head_init,
        device=device,
        augmentation=augmentation,
        learner_options=dict(learner_options),
    )


def server_models_for(
    algorithm: object, device: str, *, learner_options: Mapping[str, Any] | None = None
) -> TorchServerModels | None:
    """The one rule for server models: those an algorithm's server_* settings describe
    (`server_model`, `server_width`, `server_batch_size`, `server_lr`, `server_head_init`), on
    `device`, with `learner_options` (a config's `clients` settings that server models share);
    not photos (a run sets its data's `natural`); None for an algorithm that trains no
    registry server model."""
    if not hasattr(algorithm, "server_model") or not hasattr(algorithm, "server_learner"):
        return None
    return TorchServerModels(
        algorithm.server_model,
        width=getattr(algorithm, "server_width", 1.0),
        batch_size=getattr(algorithm, "server_batch_size", 32),
        distill_lr=getattr(algorithm, "server_lr", None),
        head_init=getattr(algorithm, "server_head_init", "kaiming"),
        device=device,
        learner_options=dict(learner_options or {}),
    )


def provide_server_learner(algorithm: object, device: str) -> None:
    """Give an algorithm that trains registry server models and has no `server_learner` (as
    `simulate` receives COSMOS) the server models `server_models_for` gives on `device`;
    algorithms without those fields, or with a factory of their own, are left as they are."""
    if getattr(algorithm, "server_learner", True) is not None:
        return
    algorithm.server_learner = server_models_for(algorithm, device)  # type: ignore[attr-defined]
