"""The framework-agnostic client-model contract: fit / predict_proba / distill.

Anything that can be trained on labelled data and produce class probabilities can take part
in a federation through this contract — that is what model-agnostic means in cosmosfl.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np


def accuracy_metrics(probs: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Top-1 accuracy, plus Top-5 when there are at least 20 classes (the paper's convention)."""
    y = np.asarray(y)
    if len(y) == 0:
        return {"top1": float("nan"), "n": 0.0}
    out = {"top1": float((probs.argmax(axis=1) == y).mean()), "n": float(len(y))}
    if probs.shape[1] >= 20:
        top5 = np.argpartition(-probs, 5, axis=1)[:, :5]
        out["top5"] = float((top5 == y[:, None]).any(axis=1).mean())
    return out


class Learner(ABC):
    """A client (or server) model behind a three-method contract.

    Inputs are numpy arrays: images as float32 (N, C, H, W) (or any feature array the learner
    understands), labels as int64 (N,), soft targets as float32 (N, M) rows on the simplex.
    """

    num_classes: int

    @abstractmethod
    def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
        """Supervised training on labelled (private) data; returns training metrics."""

    @abstractmethod
    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, float32 (N, num_classes), rows summing to 1."""

    @abstractmethod
    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        """Fit the model's predictions on `x` to soft `targets` (+ λ·r_B where supported)."""

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """Accuracy on labelled data (never trains, never augments)."""
        return accuracy_metrics(self.predict_proba(x), y)

    def get_state(self) -> Any:
        """Everything needed to restore this learner (for checkpoints)."""
        raise NotImplementedError(f"{type(self).__name__} does not support checkpoints")

    def set_state(self, state: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support checkpoints")
