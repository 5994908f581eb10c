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
"""Called as constructor(in_channels=..., num_classes=..., image_size=..., width=...) for images,
or constructor(in_features=..., num_classes=..., width=...) for feature vectors."""

INPUT_KINDS = ("images", "vectors")

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

# Which kinds of input each model takes; registered models take images unless they say more.
_INPUTS: dict[str, tuple[str, ...]] = {"mlp": INPUT_KINDS}


def model_names(inputs: str | None = None) -> tuple[str, ...]:
    """Registered model names, sorted; with `inputs` ("images" or "vectors") only the models
    that take that kind of input."""
    return tuple(sorted(n for n in _REGISTRY if inputs is None or inputs in model_inputs(n)))


def model_inputs(name: str) -> tuple[str, ...]:
    """The kinds of input ("images", "vectors") the registered model `name` takes."""
    _lookup(name)
    return _INPUTS.get(name, ("images",))


def register_model(
    name: str,
    constructor: ModelConstructor,
    *,
    overwrite: bool = False,
    inputs: tuple[str, ...] = ("images",),
) -> None:
    """Register a user model under `name` so `build_model` (and configs) can build it.

    `inputs` says which kinds of data it takes: "images" (built with in_channels and
    image_size) and/or "vectors" (built with in_features).
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(
            f"model name must be a non-empty string without surrounding spaces, got {name!r}"
        )
    if not callable(constructor):
        raise TypeError(f"constructor for model {name!r} must be callable, got {constructor!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"model {name!r} is already registered; pass overwrite=True to replace it")
    kinds = tuple(inputs)
    if not kinds or set(kinds) - set(INPUT_KINDS):
        raise ValueError(f"inputs must name some of {', '.join(INPUT_KINDS)}, got {inputs!r}")
    _REGISTRY[name] = constructor
    _INPUTS[name] = kinds


def unregister_model(name: str) -> None:
    """Remove a registered model (mainly for tests and notebooks that re-register)."""
    _lookup(name)
    del _REGISTRY[name]
    _INPUTS.pop(name, None)


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
    num_classes: int,
    in_channels: int | None = None,
    image_size: int | None = None,
    in_features: int | None = None,
    width: float = 1.0,
    seed: int | None = None,
) -> nn.Module:
    """Build a registered model for (B, in_channels, image_size, image_size) images, or for
    (B, in_features) feature vectors.

    Parameters are Kaiming-initialised from `seed` (see `kaiming_init`): the same name,
    shapes and seed give bit-identical parameters, and the global torch RNG is left as it was.
    `seed=None` draws a fresh random seed.
    """
    constructor = _lookup(name)
    arguments: dict[str, object]
    if in_features is not None:
        if in_channels is not None or image_size is not None:
            raise ValueError("give in_features (vectors) or in_channels and image_size, not both")
        if "vectors" not in model_inputs(name):
            raise ValueError(
                f"model {name!r} takes images, not feature vectors; models for feature "
                f"vectors: {', '.join(model_names('vectors'))}"
            )
        arguments = {
            "in_features": _check_int("in_features", in_features, 1),
            "num_classes": _check_int("num_classes", num_classes, 2),
            "width": _check_width(width),
        }
    else:
        if in_channels is None or image_size is None:
            raise ValueError("build_model needs in_channels and image_size, or in_features")
        if "images" not in model_inputs(name):
            raise ValueError(f"model {name!r} takes feature vectors, not images")
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


def build_model_for(
    name: str,
    sample_shape: tuple[int, ...],
    *,
    num_classes: int,
    width: float = 1.0,
    seed: int | None = None,
) -> nn.Module:
    """`build_model` for inputs of one sample's shape: (C, H, W) images (square) or (D,)
    feature vectors."""
    shape = tuple(int(s) for s in sample_shape)
    if len(shape) == 1:
        return build_model(
            name, in_features=shape[0], num_classes=num_classes, width=width, seed=seed
        )
    if len(shape) == 3 and shape[1] == shape[2]:
        return build_model(
            name,
            in_channels=shape[0],
            image_size=shape[1],
            num_classes=num_classes,
            width=width,
            seed=seed,
        )
    raise ValueError(
        f"model {name!r}: inputs of shape {shape} per sample are neither square (C, H, W) "
        "images nor (D,) feature vectors"
    )


def default_model_for(sample_shape: tuple[int, ...]) -> str:
    """The built-in model a kind of input gets by default: mlp for feature vectors, cnn for
    images (COSMOS's `server_model: auto`)."""
    return "mlp" if len(sample_shape) == 1 else "cnn"


def build_spec(model: nn.Module) -> dict[str, object] | None:
    """How `build_model` built `model` (name and arguments, no weights); None for other models."""
    spec = model.__dict__.get(BUILD_SPEC_ATTR)
    return dict(spec) if spec is not None else None


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters (trainable or not; buffers excluded)."""
    return sum(parameter.numel() for parameter in model.parameters())
