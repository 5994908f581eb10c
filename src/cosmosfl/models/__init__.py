"""Model zoo sized for 8-64 px inputs (and an MLP for feature vectors), and a registry that
builds models by name."""

from cosmosfl.models.init import kaiming_init
from cosmosfl.models.registry import (
    IMAGE_SIZE_RANGE,
    INPUT_KINDS,
    ModelConstructor,
    UnknownModelError,
    build_model,
    build_model_for,
    count_parameters,
    default_model_for,
    model_inputs,
    model_names,
    register_model,
    unregister_model,
)

__all__ = [
    "IMAGE_SIZE_RANGE",
    "INPUT_KINDS",
    "ModelConstructor",
    "UnknownModelError",
    "build_model",
    "build_model_for",
    "count_parameters",
    "default_model_for",
    "kaiming_init",
    "model_inputs",
    "model_names",
    "register_model",
    "unregister_model",
]
