"""AlexNet (models/alexnet.py): the official 32-px CIFAR network, parameter for parameter."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from cosmosfl.models import count_parameters

from .test_model_zoo import _build, _conv3x3, _images, _linear


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
