"""The 6-conv "AlexNet" of the official COSMOS code, for 32 px images (no BatchNorm)."""

from __future__ import annotations

import torch
from torch import nn

from cosmosfl.models._common import can_pool, scaled

# (output channels, max-pool after this conv); at 32 px the four pools leave a 2x2 map,
# which feeds FC 512*2*2 -> 4096 exactly as in the official code.
_CONVS: tuple[tuple[int, bool], ...] = (
    (64, True),
    (128, True),
    (256, False),
    (256, True),
    (512, False),
    (512, True),
)
HEAD_SIZE = 2


class AlexNet(nn.Module):
    """Convs 64-128-256-256-512-512 (3x3, ReLU, four 2x2 max-pools), FC 4096-4096 with dropout.

    A pool is skipped when it would leave a map smaller than 2 px (so 8 px inputs work); an
    adaptive average pool then brings any map to 2x2, which is the identity at 32 px.
    """

    def __init__(
        self, *, in_channels: int, num_classes: int, image_size: int, width: float = 1.0
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        size, previous = image_size, in_channels
        for channels, pool_after in _CONVS:
            out_channels = scaled(channels, width)
            layers += [nn.Conv2d(previous, out_channels, kernel_size=3, padding=1), nn.ReLU()]
            previous = out_channels
            if pool_after and can_pool(size, min_output=HEAD_SIZE):
                layers.append(nn.MaxPool2d(2))
                size //= 2
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(HEAD_SIZE)
        hidden = scaled(4096, width)
        self.classifier = nn.Sequential(
            nn.Linear(previous * HEAD_SIZE * HEAD_SIZE, hidden),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for images (B, C, H, W)."""
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
