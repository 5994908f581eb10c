"""Every registered model: shapes, a training step, learning, width scaling, known sizes; and
the size helpers the tests of each architecture (test_mlp.py, test_cnn.py, test_alexnet.py,
test_vgg.py, test_resnet.py) import."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cosmosfl.models import build_model, count_parameters, model_names

NUM_CLASSES = 5
WIDTH = 0.25  # keeps the big models cheap; width 1.0: the size tests (and test_<model>.py)
SHAPES = [(1, 8), (1, 28), (3, 32)]  # (in_channels, image_size)


def _build(name: str, in_channels: int, image_size: int, **kwargs: object) -> nn.Module:
    options = {"width": WIDTH, "seed": 0, "num_classes": NUM_CLASSES} | kwargs
    return build_model(name, in_channels=in_channels, image_size=image_size, **options)


def _images(batch: int, in_channels: int, image_size: int, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, in_channels, image_size, image_size, generator=generator)


@pytest.mark.parametrize(("in_channels", "image_size"), [*SHAPES, (3, 64)])
@pytest.mark.parametrize("name", model_names())
def test_eval_forward_gives_finite_logits_per_image(
    name: str, in_channels: int, image_size: int
) -> None:
    model = _build(name, in_channels, image_size).eval()
    images = _images(2, in_channels, image_size)
    with torch.no_grad():
        logits = model(images)
        again = model(images)
        single = model(images[1:])
    assert logits.shape == (2, NUM_CLASSES)
    assert logits.dtype == torch.float32
    assert torch.isfinite(logits).all()
    assert torch.equal(logits, again)  # eval mode: no dropout, no batch statistics
    # in eval mode an image's logits do not depend on the rest of the batch
    torch.testing.assert_close(single, logits[1:], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("in_channels", "image_size"), SHAPES)
@pytest.mark.parametrize("name", model_names())
def test_one_training_step_updates_parameters(name: str, in_channels: int, image_size: int) -> None:
    model = _build(name, in_channels, image_size).train()
    before = {key: value.clone() for key, value in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    labels = torch.tensor([0, NUM_CLASSES - 1])
    loss = nn.functional.cross_entropy(model(_images(2, in_channels, image_size)), labels)
    assert torch.isfinite(loss)
    loss.backward()
    for key, parameter in model.named_parameters():
        assert parameter.grad is not None, f"{key} is not connected to the logits"
        assert torch.isfinite(parameter.grad).all(), key
    optimizer.step()
    changed = [
        key for key, value in model.named_parameters() if not torch.equal(value, before[key])
    ]
    assert changed, "the step changed no parameter"
    # the classifier always receives a gradient, so the last parameter tensors must move
    assert list(before)[-1] in changed
    assert all(torch.isfinite(value).all() for value in model.parameters())


@pytest.mark.parametrize("name", model_names())
def test_model_fits_a_small_batch(name: str) -> None:
    model = _build(name, 1, 8)
    images = _images(8, 1, 8)
    labels = torch.arange(8) % NUM_CLASSES
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(25):
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.6 * losses[0]


@pytest.mark.parametrize("name", model_names())
def test_width_scales_parameter_count(name: str) -> None:
    small = count_parameters(_build(name, 3, 32, width=0.25))
    larger = count_parameters(_build(name, 3, 32, width=0.5))
    assert small < larger


def _linear(fan_in: int, fan_out: int) -> int:
    return fan_in * fan_out + fan_out


def _conv3x3(in_channels: int, out_channels: int, *, bias: bool) -> int:
    return in_channels * out_channels * 9 + (out_channels if bias else 0)


def _batchnorm(channels: int) -> int:
    return 2 * channels


@pytest.mark.parametrize(
    ("name", "published_imagenet_size", "classifier_inputs"),
    [
        # torchvision's MobileNetV2 (3,504,872) and SqueezeNet 1.1 (1,235,496) have 1000
        # classes; stride changes and a 3x3 stem of the same kernel size do not change the count.
        ("mobilenetv2", 3_504_872, 1280),
        ("squeezenet", 1_235_496, 512),
    ],
)
def test_size_matches_published_imagenet_model_with_a_smaller_head(
    name: str, published_imagenet_size: int, classifier_inputs: int
) -> None:
    expected = (
        published_imagenet_size
        - _linear(classifier_inputs, 1000)
        + _linear(classifier_inputs, NUM_CLASSES)
    )
    assert count_parameters(_build(name, 3, 32, width=1.0)) == expected


@pytest.mark.parametrize("name", ["cnn", "resnet18", "mobilenetv2", "vgg16"])
def test_batchnorm_models_use_batchnorm(name: str) -> None:
    model = _build(name, 3, 32)
    assert any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
