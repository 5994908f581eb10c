"""ResNet (models/resnet.py): ResNet-18's published CIFAR size."""

from __future__ import annotations

from cosmosfl.models import count_parameters

from .test_model_zoo import _build


def test_resnet18_has_the_published_cifar_size() -> None:
    # The widely used CIFAR ResNet-18 (3x3 stem, no max-pool) has 11,173,962 parameters
    # for 3 input channels and 10 classes.
    assert count_parameters(_build("resnet18", 3, 32, width=1.0, num_classes=10)) == 11_173_962
