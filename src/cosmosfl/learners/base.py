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


def validate_fit_inputs(x: np.ndarray, y: np.ndarray, num_classes: int) -> None:
    """Raise ValueError unless `x` and `y` have as many samples and every label lies in
    [0, num_classes): the checks a `fit` should make before training on anything."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} samples but y has {len(y)} labels")
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise ValueError(f"y must be 1-D class labels, got shape {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(
            f"labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]"
        )


def validate_distill_inputs(
    x: np.ndarray, targets: np.ndarray, weights: np.ndarray | None, num_classes: int
) -> None:
    """Raise ValueError unless `targets` is (len(x), num_classes) and `weights`, when given,
    is (len(x),): the checks a `distill` should make before training on anything."""
    shape = np.shape(targets)
    if shape != (len(x), num_classes):
        raise ValueError(
            f"targets must have shape (len(x), num_classes) = ({len(x)}, {num_classes}), "
            f"got {shape}"
        )
    if weights is not None and np.shape(weights) != (len(x),):
        raise ValueError(f"weights must have shape ({len(x)},), got {np.shape(weights)}")


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
