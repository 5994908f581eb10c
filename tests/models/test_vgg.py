"""VGG (models/vgg.py): VGG-16's parameter count."""

from __future__ import annotations

import itertools

from cosmosfl.models import count_parameters

from .test_model_zoo import _batchnorm, _build, _conv3x3, _linear


def test_vgg16_parameter_count_at_width_one() -> None:
    model = _build("vgg16", 3, 32, width=1.0, num_classes=10)
    channels = [3, 64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
    pairs = itertools.pairwise(channels)
    expected = sum(_conv3x3(i, o, bias=False) + _batchnorm(o) for i, o in pairs)
    expected += _linear(512, 512) + _linear(512, 10)
    assert count_parameters(model) == expected
