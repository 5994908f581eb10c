"""Every registered model: shapes, a training step, learning, width scaling, known sizes."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from cosmosfl.models import build_model, count_parameters, model_names

NUM_CLASSES = 5
WIDTH = 0.25  # keeps the big models cheap; width 1.0 is covered by the size tests below
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


def test_mlp_rejects_inputs_of_another_size() -> None:
    model = _build("mlp", 1, 8)
    with pytest.raises(ValueError, match=r"\(B, 1, 8, 8\)"):
        model(torch.zeros(2, 1, 9, 9))


def _linear(fan_in: int, fan_out: int) -> int:
    return fan_in * fan_out + fan_out


def _conv3x3(in_channels: int, out_channels: int, *, bias: bool) -> int:
    return in_channels * out_channels * 9 + (out_channels if bias else 0)


def _batchnorm(channels: int) -> int:
    return 2 * channels


def test_mlp_parameter_count_at_width_one() -> None:
    model = _build("mlp", 1, 28, width=1.0, num_classes=10)
    expected = _linear(28 * 28, 256) + _linear(256, 128) + _linear(128, 10)
    assert count_parameters(model) == expected


def test_cnn_parameter_count_at_width_one() -> None:
    model = _build("cnn", 3, 32, width=1.0, num_classes=10)
    convs = [(3, 32), (32, 64), (64, 128)]
    expected = sum(_conv3x3(i, o, bias=False) + _batchnorm(o) for i, o in convs)
    expected += _linear(128, 10)
    assert count_parameters(model) == expected


def test_alexnet_parameter_count_matches_official_cifar_network() -> None:
    # The official code: six 3x3 convs with bias, four max-pools (32 px -> 2 px),
    # then Linear(512 * 2 * 2, 4096), Linear(4096, 4096), Linear(4096, M).
    model = _build("alexnet", 3, 32, width=1.0, num_classes=10)
    channels = [3, 64, 128, 256, 256, 512, 512]
    expected = sum(_conv3x3(i, o, bias=True) for i, o in itertools.pairwise(channels))
    expected += _linear(512 * 2 * 2, 4096) + _linear(4096, 4096) + _linear(4096, 10)
    assert count_parameters(model) == expected
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())


def test_alexnet_layer_shapes_match_official_cifar_network() -> None:
    # The official code's AlexNet (entities.py), layer by layer in parameter order: six 3x3
    # convs with bias, 64-128-256-256-512-512, a 2x2 map after four pools at 32 px, then
    # Linear(2048, 4096), Linear(4096, 4096) and the head Linear(4096, M).
    model = _build("alexnet", 3, 32, width=1.0, num_classes=10)
    expected: list[tuple[int, ...]] = []
    for i, o in itertools.pairwise([3, 64, 128, 256, 256, 512, 512]):
        expected += [(o, i, 3, 3), (o,)]
    for i, o in [(512 * 2 * 2, 4096), (4096, 4096), (4096, 10)]:
        expected += [(o, i), (o,)]
    assert [tuple(p.shape) for p in model.parameters()] == expected
    assert count_parameters(model) == 29_715_850  # the sum of the shapes above
    pools = [m for m in model.modules() if isinstance(m, nn.MaxPool2d)]
    dropouts = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    assert len(pools) == 4 and [d.p for d in dropouts] == [0.5, 0.5]
    features = model.features(_images(2, 3, 32))
    assert features.shape == (2, 512, 2, 2)  # so the adaptive pool is the identity at 32 px
    assert torch.equal(model.pool(features), features)


def test_vgg16_parameter_count_at_width_one() -> None:
    model = _build("vgg16", 3, 32, width=1.0, num_classes=10)
    channels = [3, 64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
    pairs = itertools.pairwise(channels)
    expected = sum(_conv3x3(i, o, bias=False) + _batchnorm(o) for i, o in pairs)
    expected += _linear(512, 512) + _linear(512, 10)
    assert count_parameters(model) == expected


def test_resnet18_has_the_published_cifar_size() -> None:
    # The widely used CIFAR ResNet-18 (3x3 stem, no max-pool) has 11,173,962 parameters
    # for 3 input channels and 10 classes.
    assert count_parameters(_build("resnet18", 3, 32, width=1.0, num_classes=10)) == 11_173_962


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
