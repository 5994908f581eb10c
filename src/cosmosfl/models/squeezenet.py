"""SqueezeNet 1.1 with Fire modules, adapted to small inputs (3x3 stride-1 stem, 2x2 pools)."""

from __future__ import annotations

import torch
from torch import nn

from cosmosfl.models._common import can_pool, scaled

# Stage layout of SqueezeNet 1.1: a max-pool, then Fire modules (squeeze, expand) per stage.
# Each Fire's two expand branches are concatenated, so it outputs 2 * expand channels.
_STAGES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((16, 64), (16, 64)),
    ((32, 128), (32, 128)),
    ((48, 192), (48, 192), (64, 256), (64, 256)),
)
STEM_CHANNELS = 64


class Fire(nn.Module):
    """1x1 squeeze conv, then parallel 1x1 and 3x3 expand convs whose outputs are concatenated."""

    def __init__(self, in_channels: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(in_channels, squeeze, 1), nn.ReLU())
        self.expand1x1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU())
        self.expand3x3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Concatenation of both expand branches applied to the squeezed input."""
        squeezed = self.squeeze(x)
        return torch.cat([self.expand1x1(squeezed), self.expand3x3(squeezed)], dim=1)


class SqueezeNet(nn.Module):
    """Stem conv3x3-ReLU, three (max-pool, Fire...) stages, dropout, conv1x1 to M, ReLU, pool.

    Like SqueezeNet, the classifier is a 1x1 convolution followed by ReLU and global average
    pooling, so logits are non-negative. A pool is skipped when it would leave under 2 px.
    """

    def __init__(
        self, *, in_channels: int, num_classes: int, image_size: int, width: float = 1.0
    ) -> None:
        super().__init__()
        previous = scaled(STEM_CHANNELS, width)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, previous, 3, padding=1), nn.ReLU()]
        size = image_size
        for stage in _STAGES:
            if can_pool(size, min_output=2):
                layers.append(nn.MaxPool2d(2))
                size //= 2
            for squeeze, expand in stage:
                fire = Fire(previous, scaled(squeeze, width), scaled(expand, width))
                layers.append(fire)
                previous = 2 * scaled(expand, width)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Conv2d(previous, num_classes, 1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for images (B, C, H, W)."""
        return torch.flatten(self.classifier(self.features(x)), 1)
