"""CIFAR-style MobileNetV2: inverted residual blocks with the early downsampling removed."""

from __future__ import annotations

import torch
from torch import nn

from cosmosfl.models._common import scaled

# (expansion t, output channels c, repeats n, stride s) from the MobileNetV2 paper (Table 2),
# with the 24-channel stage at stride 1 (the paper has 2) as usual for 32 px inputs; together
# with the stride-1 stem that makes the total downsampling 8x (32 px -> 4 px) instead of 32x.
_SETTINGS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 1),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
STEM_CHANNELS = 32
LAST_CHANNELS = 1280


def _conv_bn_relu6(
    in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, groups: int = 1
) -> list[nn.Module]:
    padding = (kernel_size - 1) // 2
    return [
        nn.Conv2d(
            in_channels, out_channels, kernel_size, stride, padding, groups=groups, bias=False
        ),
        nn.BatchNorm2d(out_channels),
        nn.ReLU6(),
    ]


class InvertedResidual(nn.Module):
    """1x1 expansion, 3x3 depthwise, linear 1x1 projection; residual when shapes match."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = in_channels * expansion
        self.use_residual = stride == 1 and in_channels == out_channels
        layers: list[nn.Module] = []
        if expansion != 1:
            layers += _conv_bn_relu6(in_channels, hidden, 1)
        layers += _conv_bn_relu6(hidden, hidden, 3, stride=stride, groups=hidden)
        layers += [nn.Conv2d(hidden, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """block(x), plus x when the block keeps the shape."""
        out = self.block(x)
        return x + out if self.use_residual else out


class MobileNetV2(nn.Module):
    """Stem conv3x3 (stride 1), 17 inverted residual blocks, conv1x1 to 1280w, pool, dropout, FC.

    `width` scales every layer, the last 1x1 conv included. A stride-2 block keeps stride 1 when
    the map is already 1 px.
    """

    def __init__(
        self, *, in_channels: int, num_classes: int, image_size: int, width: float = 1.0
    ) -> None:
        super().__init__()
        previous = scaled(STEM_CHANNELS, width)
        layers: list[nn.Module] = _conv_bn_relu6(in_channels, previous, 3)
        size = image_size
        for expansion, channels, repeats, first_stride in _SETTINGS:
            out_channels = scaled(channels, width)
            for index in range(repeats):
                stride = first_stride if index == 0 and size > 1 else 1
                size = (size + stride - 1) // stride
                layers.append(InvertedResidual(previous, out_channels, stride, expansion))
                previous = out_channels
        last_channels = scaled(LAST_CHANNELS, width)
        layers += _conv_bn_relu6(previous, last_channels, 1)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last_channels, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for images (B, C, H, W)."""
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
