"""Seeded Kaiming initialisation (the paper's choice) that never touches the global torch RNG."""

from __future__ import annotations

import torch
from torch import nn

KAIMING_LAYERS: tuple[type[nn.Module], ...] = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
NORM_LAYERS: tuple[type[nn.Module], ...] = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.SyncBatchNorm,
    nn.GroupNorm,
    nn.LayerNorm,
)


def make_generator(seed: int | None) -> tuple[torch.Generator, int]:
    """A private CPU generator seeded with `seed` (a fresh random seed when None), and its seed."""
    generator = torch.Generator()
    if seed is None:
        return generator, generator.seed()
    generator.manual_seed(seed)
    return generator, seed


@torch.no_grad()
def kaiming_init(model: nn.Module, seed: int | None = None) -> nn.Module:
    """Re-initialise `model` in place and return it.

    Conv and Linear weights get Kaiming-normal values (mode="fan_out", nonlinearity="relu")
    drawn from a private generator seeded with `seed`, biases zero; BatchNorm/GroupNorm/
    LayerNorm get weight 1 and bias 0 (BatchNorm running statistics are reset). Other
    parameters are left as they are. Same model structure and seed give identical values.
    """
    generator, _ = make_generator(seed)
    for module in model.modules():
        if isinstance(module, KAIMING_LAYERS):
            weight = module.weight
            values = torch.empty(weight.shape, dtype=weight.dtype)
            nn.init.kaiming_normal_(
                values, mode="fan_out", nonlinearity="relu", generator=generator
            )
            weight.copy_(values)
            if module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, NORM_LAYERS):
            if getattr(module, "weight", None) is not None:
                module.weight.fill_(1.0)
            if getattr(module, "bias", None) is not None:
                module.bias.zero_()
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.reset_running_stats()
    return model


HEAD_INITS = ("kaiming", "default")


@torch.no_grad()
def reset_head(model: nn.Module, seed: int | None = None) -> nn.Module:
    """Give the last Linear layer PyTorch's default init (weights U(±1/sqrt(fan_in))) and a zero
    bias, seeded: small initial logits instead of Kaiming's fan_out-scaled ones."""
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not layers:
        raise ValueError("the model has no Linear layer to re-initialise as its head")
    head = layers[-1]
    generator, _ = make_generator(seed)
    bound = 1.0 / head.in_features**0.5
    values = torch.empty(head.weight.shape, dtype=head.weight.dtype)
    values.uniform_(-bound, bound, generator=generator)
    head.weight.copy_(values)
    if head.bias is not None:
        head.bias.zero_()
    return model
