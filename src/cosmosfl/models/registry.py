"""Model registry: names map to constructors; `build_model` validates, builds and seeds them."""

from __future__ import annotations

import difflib
import math
import numbers
import operator
from collections.abc import Callable

import torch
from torch import nn

from cosmosfl.models.alexnet import AlexNet
from cosmosfl.models.cnn import SmallCNN
from cosmosfl.models.init import kaiming_init, make_generator
from cosmosfl.models.mlp import MLP
from cosmosfl.models.mobilenet import MobileNetV2
from cosmosfl.models.resnet import resnet8, resnet18
from cosmosfl.models.squeezenet import SqueezeNet
from cosmosfl.models.vgg import vgg11, vgg16

ModelConstructor = Callable[..., nn.Module]
"""Called as constructor(in_channels=..., num_classes=..., image_size=..., width=...)."""

IMAGE_SIZE_RANGE = (8, 64)
MAX_SEED = 2**64 - 1
BUILD_SPEC_ATTR = "_cosmosfl_build_spec"


class UnknownModelError(ValueError):
    """A model name that is not registered; the message lists the registered names."""


_REGISTRY: dict[str, ModelConstructor] = {
    "mlp": MLP,
    "cnn": SmallCNN,
    "alexnet": AlexNet,
    "resnet8": resnet8,
    "resnet18": resnet18,
    "mobilenetv2": MobileNetV2,
    "squeezenet": SqueezeNet,
    "vgg11": vgg11,
    "vgg16": vgg16,
}


def model_names() -> tuple[str, ...]:
    """Registered model names, sorted."""
    return tuple(sorted(_REGISTRY))


def register_model(name: str, constructor: ModelConstructor, *, overwrite: bool = False) -> None:
    """Register a user model under `name` so `build_model` (and configs) can build it."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(
            f"model name must be a non-empty string without surrounding spaces, got {name!r}"
        )
    if not callable(constructor):
        raise TypeError(f"constructor for model {name!r} must be callable, got {constructor!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"model {name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[name] = constructor


def unregister_model(name: str) -> None:
    """Remove a registered model (mainly for tests and notebooks that re-register)."""
    _lookup(name)
    del _REGISTRY[name]


def _lookup(name: str) -> ModelConstructor:
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        known = model_names()
        message = f"model={name!r} is not registered; registered models: {', '.join(known)}"
        if isinstance(name, str):
            close = difflib.get_close_matches(name.lower(), known, n=1)
            if close:
                message += f" (did you mean {close[0]!r}?)"
        raise UnknownModelError(message) from None


def _check_int(field: str, value: object, low: int, high: int | None = None) -> int:
    allowed = f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{field} must be {allowed}, got {value!r}")
    number = operator.index(value)
    if number < low or (high is not None and number > high):
        raise ValueError(f"{field} must be {allowed}, got {number}")
    return number


def _check_width(width: object) -> float:
    if (
        isinstance(width, bool)
        or not isinstance(width, numbers.Real)
        or not math.isfinite(width)
        or width <= 0
    ):
        raise ValueError(f"width must be a finite number > 0, got {width!r}")
    return float(width)


def build_model(
    name: str,
    *,
    in_channels: int,
    num_classes: int,
    image_size: int,
    width: float = 1.0,
    seed: int | None = None,
) -> nn.Module:
    """Build a registered model for (B, in_channels, image_size, image_size) inputs.

    Parameters are Kaiming-initialised from `seed` (see `kaiming_init`): the same name,
    shapes and seed give bit-identical parameters, and the global torch RNG is left as it was.
    `seed=None` draws a fresh random seed.
    """
    constructor = _lookup(name)
    arguments = {
        "in_channels": _check_int("in_channels", in_channels, 1),
        "num_classes": _check_int("num_classes", num_classes, 2),
        "image_size": _check_int("image_size", image_size, *IMAGE_SIZE_RANGE),
        "width": _check_width(width),
    }
    if seed is not None:
        seed = _check_int("seed", seed, 0, MAX_SEED)
    _, seed = make_generator(seed)
    # Layers draw their default init from the global CPU RNG while they are constructed; fork
    # it so the caller's stream is untouched, and seed it so parameters that kaiming_init
    # leaves alone (in user models) are reproducible too.
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        model = constructor(**arguments)
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"constructor for model {name!r} returned {type(model).__name__}, "
            "expected a torch.nn.Module"
        )
    model = kaiming_init(model, seed)
    # Lets an engine rebuild the same architecture in another process (Flower's evaluation
    # of server models on clients' test splits); see `build_spec`.
    model.__dict__[BUILD_SPEC_ATTR] = {"name": name, **arguments}
    return model


def build_spec(model: nn.Module) -> dict[str, object] | None:
    """How `build_model` built `model` (name and arguments, no weights); None for other models."""
    spec = model.__dict__.get(BUILD_SPEC_ATTR)
    return dict(spec) if spec is not None else None


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters (trainable or not; buffers excluded)."""
    return sum(parameter.numel() for parameter in model.parameters())
