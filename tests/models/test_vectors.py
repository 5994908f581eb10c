"""Models for feature vectors: the mlp built from in_features, which models take which kind of
input, and the default server model per kind."""

import pytest
import torch
from torch import nn

from cosmosfl.models import (
    build_model,
    build_model_for,
    default_model_for,
    model_inputs,
    model_names,
    register_model,
    unregister_model,
)


def test_mlp_takes_feature_vectors_and_checks_their_width() -> None:
    net = build_model("mlp", in_features=36, num_classes=6, seed=0)
    assert net(torch.zeros(5, 36)).shape == (5, 6)
    with pytest.raises(ValueError, match=r"built for inputs of shape \(B, 36\), got \(5, 24\)"):
        net(torch.zeros(5, 24))


def test_same_seed_same_vector_mlp_and_images_still_build() -> None:
    a = build_model_for("mlp", (12,), num_classes=3, seed=4)
    b = build_model_for("mlp", (12,), num_classes=3, seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    image_net = build_model_for("cnn", (1, 8, 8), num_classes=3, seed=4)
    assert image_net(torch.zeros(2, 1, 8, 8)).shape == (2, 3)


def test_image_models_refuse_vectors_with_the_alternatives_named() -> None:
    with pytest.raises(ValueError, match=r"takes images, not feature vectors.*mlp"):
        build_model_for("cnn", (36,), num_classes=6, seed=0)
    with pytest.raises(ValueError, match="neither square"):
        build_model_for("mlp", (3, 8), num_classes=6, seed=0)
    with pytest.raises(ValueError, match="not both"):
        build_model("mlp", in_features=4, in_channels=1, image_size=8, num_classes=2)


def test_default_model_follows_the_kind_of_input() -> None:
    assert default_model_for((36,)) == "mlp"
    assert default_model_for((3, 32, 32)) == "cnn"
    assert "mlp" in model_names("vectors") and "cnn" not in model_names("vectors")


def test_registered_model_declares_the_inputs_it_takes() -> None:
    def linear(*, in_features: int, num_classes: int, width: float = 1.0) -> nn.Module:
        return nn.Linear(in_features, num_classes)

    register_model("test-linear", linear, inputs=("vectors",))
    try:
        assert model_inputs("test-linear") == ("vectors",)
        assert build_model("test-linear", in_features=7, num_classes=2)(
            torch.zeros(1, 7)
        ).shape == (
            1,
            2,
        )
        with pytest.raises(ValueError, match="feature vectors, not images"):
            build_model("test-linear", in_channels=1, image_size=8, num_classes=2)
    finally:
        unregister_model("test-linear")
    with pytest.raises(ValueError, match="inputs must name"):
        register_model("test-bad", linear, inputs=("audio",))
