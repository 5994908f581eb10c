"""A small three-block CNN: a fast default for 8-64 px images."""

from __future__ import annotations

import torch
from torch import nn

from cosmosfl.models._common import can_pool, scaled


def _conv_bn_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    return [
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
    ]


class SmallCNN(nn.Module):
    """conv(32w)-pool, conv(64w)-pool, conv(128w), global average pool, Linear(128w, M).

    Convolutions are 3x3 with BatchNorm and ReLU; a max-pool is skipped when it would leave a
    map smaller than 2 px, so 8 px inputs work.
    """

    def __init__(
        self, *, in_channels: int, num_classes: int, image_size: int, width: float = 1.0
    ) -> None:
        super().__init__()
        channels = [scaled(32, width), scaled(64, width), scaled(128, width)]
        layers: list[nn.Module] = []
        size, previous = image_size, in_channels
        for index, out_channels in enumerate(channels):
            layers += _conv_bn_relu(previous, out_channels)
            previous = out_channels
            if index < len(channels) - 1 and can_pool(size, min_output=2):
                layers.append(nn.MaxPool2d(2))
                size //= 2
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(previous, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for images (B, C, H, W)."""
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
