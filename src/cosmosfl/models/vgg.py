"""CIFAR-style VGG with BatchNorm (VGG-16 and VGG-11) and a small 512-512-M classifier."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from cosmosfl.models._common import can_pool, scaled

POOL = "M"
VGG11: tuple[int | str, ...] = (64, POOL, 128, POOL, 256, 256, POOL, 512, 512, POOL, 512, 512, POOL)
VGG16: tuple[int | str, ...] = (
    64, 64, POOL,
    128, 128, POOL,
    256, 256, 256, POOL,
    512, 512, 512, POOL,
    512, 512, 512, POOL,
)  # fmt: skip


class VGG(nn.Module):
    """conv3x3-BN-ReLU stacks with max-pools, global average pool, Linear-ReLU-Dropout-Linear.

    `config` lists conv output channels and `"M"` for a 2x2 max-pool; a pool is skipped once
    the map is 1 px, so 8 px inputs work.
    """

    def __init__(
        self,
        *,
        in_channels: int,
        num_classes: int,
        image_size: int,
        width: float = 1.0,
        config: Sequence[int | str] = VGG16,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        size, previous = image_size, in_channels
        for entry in config:
            if entry == POOL:
                if can_pool(size, min_output=1):
                    layers.append(nn.MaxPool2d(2))
                    size //= 2
                continue
            out_channels = scaled(int(entry), width)
            layers += [
                nn.Conv2d(previous, out_channels, 3, padding=1, bias=False),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(),
            ]
            previous = out_channels
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        hidden = scaled(512, width)
        self.classifier = nn.Sequential(
            nn.Linear(previous, hidden),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for images (B, C, H, W)."""
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def vgg16(*, in_channels: int, num_classes: int, image_size: int, width: float = 1.0) -> VGG:
    """VGG-16 (13 convs in 5 blocks) with BatchNorm and a 512-512-M head."""
    return VGG(in_channels=in_channels, num_classes=num_classes, image_size=image_size, width=width)


def vgg11(*, in_channels: int, num_classes: int, image_size: int, width: float = 1.0) -> VGG:
    """VGG-11 (8 convs in 5 blocks) with BatchNorm and a 512-512-M head."""
    return VGG(
        in_channels=in_channels,
        num_classes=num_classes,
        image_size=image_size,
        width=width,
        config=VGG11,
    )
