"""Soft-label softmax cross-entropy as a custom objective for gradient-boosted trees.

For a row with soft target t (a point on the simplex), weight w and raw scores z, the loss
w · Σ_c −t_c log softmax(z)_c has gradient w (p − t) and diagonal Hessian w p (1 − p) with
p = softmax(z), which is what XGBoost's and LightGBM's custom-objective APIs take (one column
per class). Summed over a row's weighted copies (class c with weight w t_c), the built-in
multiclass objectives compute exactly these statistics, so one row with its soft target trains
what its M copies did, at the cost of one row.

Both libraries scale the built-in Hessian by a constant (XGBoost 2 p (1 − p), LightGBM
M/(M − 1) p (1 − p)); `hessian_factor` repeats the library's own so the Newton steps, and how
`min_child_weight` / `min_sum_hessian_in_leaf` act, stay those of the built-in objective. Both
built-in objectives also start from the log of the weighted class frequencies (XGBoost 3
estimates it as its intercept, LightGBM's `boost_from_average`); a custom objective starts
from 0, so `base` (that log-prior, one value per class) is added to the raw scores here and
at prediction, and kept with the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The floor of a class's frequency in the starting scores: a class with no mass starts at
# log(1e-15) (LightGBM's kEpsilon), i.e. with ~0 probability, as the built-in objective does.
PRIOR_FLOOR = 1e-15


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (n, M) raw scores, in float64."""
    z = np.asarray(scores, np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def log_prior(targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Log of the weighted class frequencies of soft `targets` (M,): the starting scores."""
    mass = (np.asarray(targets, np.float64) * np.asarray(weights, np.float64)[:, None]).sum(0)
    total = mass.sum()
    prior = mass / total if total > 0 else np.full(len(mass), 1.0 / len(mass))
    return np.log(np.maximum(prior, PRIOR_FLOOR))


class SoftmaxObjective:
    """`(raw scores, dataset) -> (gradient, Hessian)`, both (n, M), for soft `targets` (n, M)
    with row `weights` (n,), scores offset by `base` (M,). Picklable; the dataset argument is
    ignored (the targets live here, not in the library's one label column)."""

    def __init__(
        self,
        targets: np.ndarray,
        weights: np.ndarray,
        base: np.ndarray,
        *,
        hessian_factor: float = 1.0,
        hessian_floor: float = 0.0,
    ) -> None:
        self.targets = np.asarray(targets, np.float64)
        self.weights = np.asarray(weights, np.float64)[:, None]
        self.base = np.asarray(base, np.float64)
        self.hessian_factor = float(hessian_factor)
        self.hessian_floor = float(hessian_floor)

    def gradients(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and diagonal Hessian of the weighted soft-label cross-entropy at `scores`."""
        p = softmax(np.asarray(scores, np.float64).reshape(self.targets.shape) + self.base)
        grad = self.weights * (p - self.targets)
        hess = np.maximum(self.hessian_factor * self.weights * p * (1.0 - p), self.hessian_floor)
        return grad, hess

    def loss(self, scores: np.ndarray) -> float:
        """The weighted soft-label cross-entropy at `scores` (what the gradients differentiate)."""
        z = np.asarray(scores, np.float64).reshape(self.targets.shape) + self.base
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-(self.weights * self.targets * logp).sum())

    def __call__(self, scores: np.ndarray, data: Any = None) -> tuple[np.ndarray, np.ndarray]:
        return self.gradients(scores)
