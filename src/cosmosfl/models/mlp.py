"""Multilayer perceptron: the cheapest model, for flattened images (sized for 8x8 digits) and
for feature vectors (tabular records, embeddings)."""

from __future__ import annotations

import torch
from torch import nn

from cosmosfl.models._common import scaled


class MLP(nn.Module):
    """flatten -> Linear(D, 256w) -> ReLU -> Linear(256w, 128w) -> ReLU -> Linear(128w, M).

    Built either for images (`in_channels`, `image_size`: D = C*H*W) or for feature vectors
    (`in_features` = D).
    """

    def __init__(
        self,
        *,
        num_classes: int,
        in_channels: int | None = None,
        image_size: int | None = None,
        in_features: int | None = None,
        width: float = 1.0,
    ) -> None:
        super().__init__()
        if in_features is not None:
            if in_channels is not None or image_size is not None:
                raise ValueError("mlp takes in_features or (in_channels, image_size), not both")
            self.input_shape: tuple[int, ...] = (int(in_features),)
        elif in_channels is not None and image_size is not None:
            self.input_shape = (in_channels, image_size, image_size)
        else:
            raise ValueError("mlp needs in_features (vectors) or in_channels and image_size")
        hidden1, hidden2 = scaled(256, width), scaled(128, width)
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(int(torch.tensor(self.input_shape).prod()), hidden1),
            nn.ReLU(),
            nn.Linear(hidden1, hidden2),
            nn.ReLU(),
            nn.Linear(hidden2, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, M) for inputs of exactly the shape the MLP was built for."""
        if tuple(x.shape[1:]) != self.input_shape:
            raise ValueError(
                f"mlp was built for inputs of shape (B, {', '.join(map(str, self.input_shape))}), "
                f"got {tuple(x.shape)}"
            )
        return self.layers(x)
