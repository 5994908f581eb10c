"""Aggregating clients' soft labels into one teacher, and the temperature applied to targets."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosmosfl.core.constraints import Interval, Options, check

AGGREGATIONS = ("mean", "median", "max", "trimmed_mean")
# The settings of aggregate and apply_temperature, checked here and by every algorithm that
# takes them (core/constraints.py).
AGGREGATION = Options(AGGREGATIONS)
TRIM_FRACTION = Interval(float, 0, 0.5, closed="left")
TEMPERATURE = Interval(float, 0, note="0 = hard labels")


def _normalise(p: np.ndarray) -> np.ndarray:
    s = p.sum(axis=-1, keepdims=True)
    # A row that aggregates to all zeros (possible with median) falls back to uniform.
    uniform = np.full_like(p, 1.0 / p.shape[-1])
    return np.where(s > 0, p / np.where(s > 0, s, 1.0), uniform)


def _shape_of(probs: Sequence[np.ndarray]) -> tuple[int, ...]:
    shapes = {np.shape(p) for p in probs}
    if len(shapes) != 1:
        raise ValueError(
            f"pseudo-label matrices differ in shape: {', '.join(map(str, sorted(shapes)))}"
        )
    return shapes.pop()


def _float64_sum(probs: Sequence[np.ndarray]) -> np.ndarray:
    """Sum of the matrices in float64, accumulated one matrix at a time in list order."""
    _shape_of(probs)
    total = np.array(probs[0], dtype=np.float64)
    for p in probs[1:]:
        total += np.asarray(p)  # float32 widened exactly to float64, then added
    return total


def _stack_float64(probs: Sequence[np.ndarray]) -> np.ndarray:
    """One float64 (K, n, M) array of the matrices, filled in place (no per-matrix copies)."""
    stack = np.empty((len(probs), *_shape_of(probs)), dtype=np.float64)
    for i, p in enumerate(probs):
        stack[i] = p
    return stack


def aggregate(
    probs: Sequence[np.ndarray], rule: str = "mean", *, trim_fraction: float = 0.2
) -> np.ndarray:
    """Combine K soft-label matrices of shape (n, M) into one (n, M) teacher on the simplex.

    mean: the paper's f̄_k. median: per-entry median, renormalised (robust to a minority of bad
    clients). max: per sample, the prediction of the most confident client. trimmed_mean: per
    entry, drop the `trim_fraction` highest and lowest values, average the rest, renormalise.
    """
    check(AGGREGATION, "aggregation", rule)
    if len(probs) == 0:
        raise ValueError("cannot aggregate an empty list of pseudo-labels")
    if rule == "mean":
        # A running float64 sum: the same additions, in the same order, as the mean over a
        # stacked (K, n, M) copy, so the same bits, without K float64 copies of the labels
        # (with thousands of clients and a large U those copies cost more than the labels).
        total = _float64_sum(probs)
        return (total / len(probs)).astype(np.float32)
    stack = _stack_float64(probs)  # (K, n, M)
    if rule == "median":
        out = _normalise(np.median(stack, axis=0))
    elif rule == "max":
        confidence = stack.max(axis=2)  # (K, n)
        best = confidence.argmax(axis=0)  # lowest client index wins ties
        out = stack[best, np.arange(stack.shape[1])]
    else:
        check(TRIM_FRACTION, "trim_fraction", trim_fraction)
        k = stack.shape[0]
        cut = int(np.floor(trim_fraction * k))
        ordered = np.sort(stack, axis=0)
        out = _normalise(ordered[cut : k - cut].mean(axis=0))
    return out.astype(np.float32)


def apply_temperature(probs: np.ndarray, temperature: float) -> np.ndarray:
    """Sharpen or soften targets: p^(1/T) renormalised; T = 0 gives one-hot argmax."""
    check(TEMPERATURE, "temperature", temperature)
    p = np.asarray(probs, dtype=np.float64)
    if temperature == 0:
        out = np.zeros_like(p)
        out[np.arange(p.shape[0]), p.argmax(axis=1)] = 1.0
        return out.astype(np.float32)
    if temperature == 1:
        return p.astype(np.float32)
    # Work in log space so small T does not underflow every entry of a row to zero.
    logp = np.log(np.clip(p, 1e-30, None)) / temperature
    logp -= logp.max(axis=1, keepdims=True)
    e = np.exp(logp)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
