"""The model registry: lookup by name, user registration, argument validation."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest
import torch
from torch import nn

from cosmosfl.models import (
    UnknownModelError,
    build_model,
    model_names,
    register_model,
    unregister_model,
)

VALID = {"in_channels": 1, "num_classes": 3, "image_size": 8}


class TinyNet(nn.Module):
    """A user model: a linear layer plus a parameter that kaiming_init does not touch."""

    def __init__(
        self, *, in_channels: int, num_classes: int, image_size: int, width: float, hidden: int = 4
    ) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Flatten(), nn.Linear(in_channels * image_size**2, hidden), nn.ReLU()
        )
        self.head = nn.Linear(hidden, num_classes)
        self.scale = nn.Parameter(torch.randn(num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)) * self.scale


@pytest.fixture
def user_model() -> Iterator[str]:
    name = "test-tiny-net"
    register_model(name, partial(TinyNet, hidden=6))
    yield name
    unregister_model(name)


def test_required_models_are_registered() -> None:
    required = {"mlp", "cnn", "alexnet", "resnet18", "mobilenetv2", "squeezenet", "vgg16"}
    assert required <= set(model_names())
    assert list(model_names()) == sorted(model_names())


def test_unknown_name_lists_registered_names() -> None:
    with pytest.raises(UnknownModelError) as caught:
        build_model("resnet1000", **VALID)
    assert isinstance(caught.value, ValueError)
    for name in model_names():
        assert name in str(caught.value)
    assert "resnet1000" in str(caught.value)


def test_unknown_name_suggests_a_close_match() -> None:
    with pytest.raises(UnknownModelError, match="did you mean 'resnet18'"):
        build_model("ResNet18", **VALID)


def test_registered_user_model_is_built_and_seeded(user_model: str) -> None:
    assert user_model in model_names()
    model = build_model(user_model, seed=3, **VALID)
    assert isinstance(model, TinyNet)
    assert model.body[1].out_features == 6  # the partial's keyword reached the constructor
    assert torch.count_nonzero(model.head.bias) == 0  # kaiming_init ran
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 3)
    # parameters outside kaiming_init's reach are reproducible from the seed as well
    again = build_model(user_model, seed=3, **VALID)
    assert torch.equal(model.scale, again.scale)


def test_duplicate_registration_needs_overwrite(user_model: str) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_model(user_model, TinyNet)
    register_model(user_model, partial(TinyNet, hidden=9), overwrite=True)
    assert build_model(user_model, **VALID).body[1].out_features == 9


def test_builtin_names_cannot_be_taken_by_accident() -> None:
    with pytest.raises(ValueError, match="'cnn'"):
        register_model("cnn", TinyNet)


def test_unregister_unknown_name_raises() -> None:
    with pytest.raises(UnknownModelError):
        unregister_model("never-registered")


@pytest.mark.parametrize("name", ["", " padded ", 3])
def test_register_rejects_bad_names(name: object) -> None:
    with pytest.raises(ValueError, match="model name"):
        register_model(name, TinyNet)  # type: ignore[arg-type]


def test_register_rejects_non_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        register_model("not-callable", nn.Linear(2, 2).weight)  # type: ignore[arg-type]
    assert "not-callable" not in model_names()


def test_constructor_must_return_a_module() -> None:
    register_model("returns-a-string", lambda **_: "not a model")
    try:
        with pytest.raises(TypeError, match="returns-a-string"):
            build_model("returns-a-string", **VALID)
    finally:
        unregister_model("returns-a-string")


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("image_size", 4, r"\[8, 64\]"),
        ("image_size", 128, r"\[8, 64\]"),
        ("image_size", 32.0, r"\[8, 64\]"),
        ("num_classes", 1, ">= 2"),
        ("in_channels", 0, ">= 1"),
        ("in_channels", True, ">= 1"),
        ("width", 0, "> 0"),
        ("width", -0.5, "> 0"),
        ("width", float("nan"), "> 0"),
        ("width", "1", "> 0"),
        ("seed", -1, "seed"),
        ("seed", 1.5, "seed"),
    ],
)
def test_bad_arguments_name_the_field_value_and_allowed_range(
    field: str, value: object, allowed: str
) -> None:
    arguments = {"width": 1.0, "seed": 0, **VALID, field: value}
    with pytest.raises(ValueError, match=field) as caught:
        build_model("mlp", **arguments)
    assert caught.match(allowed)
    assert repr(value) in str(caught.value) or str(value) in str(caught.value)


def test_numpy_integers_are_accepted() -> None:
    np = pytest.importorskip("numpy")
    model = build_model(
        "mlp",
        in_channels=np.int64(1),
        num_classes=np.int32(3),
        image_size=np.int64(8),
        seed=np.uint64(2),
    )
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 3)
