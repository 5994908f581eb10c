"""CIFAR-style residual networks (3x3 stem, stride 1, no stem max-pool): ResNet-18 and ResNet-8."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from cosmosfl.models._common import scaled


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity (or 1x1 conv-BN projection) shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Stem conv3x3-BN-ReLU, stages of BasicBlocks, global average pool, Linear.

    `blocks`, `channels` and `strides` give one entry per stage. A stride-2 stage keeps stride 1
    when the map is already 1 px, so 8 px inputs work.
    """

    def __init__(
        self,
        *,
        in_channels: int,
        num_classes: int,
        image_size: int,
        width: float = 1.0,
        blocks: Sequence[int] = (2, 2, 2, 2),
        channels: Sequence[int] = (64, 128, 256, 512),
        strides: Sequence[int] = (1, 2, 2, 2),
    ) -> None:
        super().__init__()
        if not len(blocks) == len(channels) == len(strides):
            raise ValueError(
                f"blocks, channels and strides need one entry per stage, got "
                f"{len(blocks)}, {len(channels)} and {len(strides)}"
            )
        stem_channels = scaled(channels[0], width)
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, stem_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(stem_channels),
            nn.ReLU(),
        )
        stages: list[nn.Module] = []
        size, previous = image_size, stem_channels
        for count, stage_channels, stage_stride in zip(blocks, channels, strides, strict=True):
            out_channels = scaled(stage_channels, width)
            stride = stage_stride if size > 1 else 1
            size = (size + stride - 1) // stride
            layers: list[nn.Module] = []
            for index in range(count):
                layers.append(BasicBlock(previous, out_channels, stride if index == 0 else 1))
                previous = out_channels
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(previous, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for images (B, C, H, W)."""
        return self.classifier(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def resnet18(*, in_channels: int, num_classes: int, image_size: int, width: float = 1.0) -> ResNet:
    """CIFAR ResNet-18: BasicBlocks [2, 2, 2, 2], 64-128-256-512 channels, strides 1-2-2-2."""
    return ResNet(
        in_channels=in_channels, num_classes=num_classes, image_size=image_size, width=width
    )


def resnet8(*, in_channels: int, num_classes: int, image_size: int, width: float = 1.0) -> ResNet:
    """CIFAR ResNet-8 (depth 6n+2, n=1): one BasicBlock per stage, 16-32-64 channels."""
    return ResNet(
        in_channels=in_channels,
        num_classes=num_classes,
        image_size=image_size,
        width=width,
        blocks=(1, 1, 1),
        channels=(16, 32, 64),
        strides=(1, 2, 2),
    )
