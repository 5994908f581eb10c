"""Multilayer perceptron on flattened pixels: the cheapest model, sized for 8x8 digits."""

from __future__ import annotations

import torch
from torch import nn

from cosmosfl.models._common import scaled


class MLP(nn.Module):
    """flatten -> Linear(C*H*W, 256w) -> ReLU -> Linear(256w, 128w) -> ReLU -> Linear(128w, M)."""

    def __init__(
        self, *, in_channels: int, num_classes: int, image_size: int, width: float = 1.0
    ) -> None:
        super().__init__()
        self.input_shape = (in_channels, image_size, image_size)
        hidden1, hidden2 = scaled(256, width), scaled(128, width)
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(in_channels * image_size * image_size, hidden1),
            nn.ReLU(),
            nn.Linear(hidden1, hidden2),
            nn.ReLU(),
            nn.Linear(hidden2, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for images (B, C, H, W) of exactly the size the MLP was built for."""
        if tuple(x.shape[1:]) != self.input_shape:
            raise ValueError(
                f"mlp was built for inputs of shape (B, {', '.join(map(str, self.input_shape))}), "
                f"got {tuple(x.shape)}"
            )
        return self.layers(x)
