"""Seeded Kaiming initialisation: reproducible, private RNG, the right scale."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from cosmosfl.models import build_model, kaiming_init, model_names


def _build(name: str, seed: int | None, **kwargs: object) -> nn.Module:
    options = {"in_channels": 3, "num_classes": 5, "image_size": 32, "width": 0.25} | kwargs
    return build_model(name, seed=seed, **options)


def _same_state(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("name", model_names())
def test_same_seed_gives_identical_state_and_another_seed_differs(name: str) -> None:
    first, second, other = _build(name, 7), _build(name, 7), _build(name, 8)
    assert _same_state(first, second)
    assert not _same_state(first, other)


def test_seed_none_draws_a_fresh_seed_each_time() -> None:
    assert not _same_state(_build("cnn", None), _build("cnn", None))


@pytest.mark.parametrize("seed", [3, None])
def test_building_leaves_the_global_rng_untouched(seed: int | None) -> None:
    torch.manual_seed(1234)
    expected = torch.rand(5)
    torch.manual_seed(1234)
    _build("resnet8", seed)
    assert torch.equal(torch.rand(5), expected)


def test_kaiming_init_leaves_the_global_rng_untouched() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Linear(8, 4))
    state = torch.get_rng_state()
    kaiming_init(model, seed=0)
    kaiming_init(model, seed=None)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("name", model_names())
def test_biases_are_zero_and_norm_layers_are_identity(name: str) -> None:
    model = _build(name, 0)
    for module in model.modules():
        if isinstance(module, nn.Conv2d | nn.Linear) and module.bias is not None:
            assert torch.count_nonzero(module.bias) == 0
        if isinstance(module, nn.BatchNorm2d):
            assert torch.equal(module.weight, torch.ones_like(module.weight))
            assert torch.count_nonzero(module.bias) == 0


def _assert_kaiming_fan_out(weight: torch.Tensor, fan_out: int) -> None:
    expected_std = math.sqrt(2.0 / fan_out)
    assert weight.std().item() == pytest.approx(expected_std, rel=0.03)
    assert abs(weight.mean().item()) < 0.02 * expected_std


def test_conv_weight_std_matches_kaiming_fan_out() -> None:
    model = _build("resnet18", 0)  # width 0.25: the last stage's convs are 128 -> 128, 3x3
    conv = model.stages[-1][-1].conv2
    assert conv.weight.shape == (128, 128, 3, 3)
    _assert_kaiming_fan_out(conv.weight, fan_out=128 * 3 * 3)


def test_linear_weight_std_matches_kaiming_fan_out() -> None:
    model = _build("alexnet", 0)  # width 0.25: FC 1024 -> 1024
    linear = model.classifier[3]
    assert linear.weight.shape == (1024, 1024)
    _assert_kaiming_fan_out(linear.weight, fan_out=1024)


def test_kaiming_init_resets_a_trained_model() -> None:
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    model(torch.randn(3, 1, 3, 3))  # updates BatchNorm running statistics
    kaiming_init(model, seed=0)
    batchnorm = model[1]
    assert torch.count_nonzero(model[0].bias) == 0
    assert torch.equal(batchnorm.weight, torch.ones(4))
    assert torch.equal(batchnorm.running_mean, torch.zeros(4))
    assert torch.equal(batchnorm.running_var, torch.ones(4))
    assert batchnorm.num_batches_tracked.item() == 0


def test_kaiming_init_keeps_dtype_and_is_reproducible_in_float64() -> None:
    first = kaiming_init(nn.Linear(64, 32).double(), seed=5)
    second = kaiming_init(nn.Linear(64, 32).double(), seed=5)
    assert first.weight.dtype == torch.float64
    assert torch.equal(first.weight, second.weight)
