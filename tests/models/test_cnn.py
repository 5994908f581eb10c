"""The small CNN (models/cnn.py): its parameter count."""

from __future__ import annotations

from cosmosfl.models import count_parameters

from .test_model_zoo import _batchnorm, _build, _conv3x3, _linear


def test_cnn_parameter_count_at_width_one() -> None:
    model = _build("cnn", 3, 32, width=1.0, num_classes=10)
    convs = [(3, 32), (32, 64), (64, 128)]
    expected = sum(_conv3x3(i, o, bias=False) + _batchnorm(o) for i, o in convs)
    expected += _linear(128, 10)
    assert count_parameters(model) == expected
