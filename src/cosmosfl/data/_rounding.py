"""Integer allocation helpers shared by the subsampler and the partitioners."""

from __future__ import annotations

import numpy as np


def largest_remainder(weights: np.ndarray, total: int) -> np.ndarray:
    """Split `total` into integers proportional to `weights` that sum exactly to `total`.

    Largest-remainder (Hamilton) rounding: every share is the floor or the ceiling of its exact
    value, so rounding never loses or invents samples. Ties go to the lower index.
    """
    w = np.asarray(weights, dtype=np.float64)
    out = np.zeros(len(w), dtype=np.int64)
    s = w.sum()
    if total <= 0 or len(w) == 0 or not s > 0:
        return out
    exact = w / s * total
    out = np.floor(exact).astype(np.int64)
    short = int(total - out.sum())
    if short > 0:
        order = np.argsort(-(exact - out), kind="stable")
        out[order[:short]] += 1
    return out


def capped_allocation(weights: np.ndarray, total: int, caps: np.ndarray) -> np.ndarray:
    """Like `largest_remainder`, but no share exceeds its cap; surplus goes to the others.

    Shares with zero weight stay zero. The result sums to min(total, caps of positive weights).
    Terminates after at most len(weights) rounds, since each round fixes one or more shares.
    """
    w = np.asarray(weights, dtype=np.float64).copy()
    caps = np.asarray(caps, dtype=np.int64)
    w[caps <= 0] = 0.0
    out = np.zeros(len(w), dtype=np.int64)
    free = w > 0
    remaining = min(int(total), int(caps[free].sum()))
    for _ in range(len(w) + 1):
        if remaining <= 0 or not free.any():
            break
        share = largest_remainder(np.where(free, w, 0.0), remaining)
        over = free & (share >= caps)
        if not over.any():
            out += share
            break
        # Shares that reach their cap are fixed at it; redistribute the rest among the others.
        out[over] = caps[over]
        remaining -= int(caps[over].sum())
        free &= ~over
    return out


def stratified_indices(
    labels: np.ndarray, fraction_or_count: float | int, rng: np.random.Generator
) -> np.ndarray:
    """Pick a class-proportional random subset of positions in `labels` (sorted).

    An int asks for that many samples in total; a float in (0, 1) for that fraction of the data.
    Each class contributes the floor or ceiling of its exact share.
    """
    labels = np.asarray(labels)
    if isinstance(fraction_or_count, float):
        total = round(fraction_or_count * len(labels))
    else:
        total = int(fraction_or_count)
    total = min(max(total, 0), len(labels))
    classes, counts = np.unique(labels, return_counts=True)
    take = largest_remainder(counts, total)
    picked = [
        rng.choice(np.flatnonzero(labels == c), size=k, replace=False)
        for c, k in zip(classes, take, strict=True)
        if k > 0
    ]
    if not picked:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.concatenate(picked)).astype(np.int64)
