"""The MLP (models/mlp.py): its input size and its parameter count."""

from __future__ import annotations

import pytest
import torch

from cosmosfl.models import count_parameters

from .test_model_zoo import _build, _linear


def test_mlp_rejects_inputs_of_another_size() -> None:
    model = _build("mlp", 1, 8)
    with pytest.raises(ValueError, match=r"\(B, 1, 8, 8\)"):
        model(torch.zeros(2, 1, 9, 9))


def test_mlp_parameter_count_at_width_one() -> None:
    model = _build("mlp", 1, 28, width=1.0, num_classes=10)
    expected = _linear(28 * 28, 256) + _linear(256, 128) + _linear(128, 10)
    assert count_parameters(model) == expected
