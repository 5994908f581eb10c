"""Model zoo sized for 8-64 px inputs, and a registry that builds models by name."""

from cosmosfl.models.init import kaiming_init
from cosmosfl.models.registry import (
    IMAGE_SIZE_RANGE,
    ModelConstructor,
    UnknownModelError,
    build_model,
    count_parameters,
    model_names,
    register_model,
    unregister_model,
)

__all__ = [
    "IMAGE_SIZE_RANGE",
    "ModelConstructor",
    "UnknownModelError",
    "build_model",
    "count_parameters",
    "kaiming_init",
    "model_names",
    "register_model",
    "unregister_model",
]
