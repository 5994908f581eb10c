"""Splitting labelled samples: integer shares that sum exactly (largest remainder), a seeded
class-proportional subset (the subsampler, the partitioners, U), and the stratified train/test
split every file without its own split gets (tables and folders of images alike)."""

from __future__ import annotations

import numpy as np

from cosmosfl.data.errors import DatasetFormatError

__all__ = [
    "capped_allocation",
    "check_test_fraction",
    "largest_remainder",
    "split_arrays",
    "stratified_indices",
    "stratified_test_mask",
]


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


# -- the stratified train/test split of a file --------------------------------------------------
def check_test_fraction(test_fraction: float) -> float:
    """Return `test_fraction` as a float, or raise ValueError unless it lies strictly in (0, 1)."""
    ok = isinstance(test_fraction, int | float) and not isinstance(test_fraction, bool)
    if not ok or not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    return float(test_fraction)


def stratified_test_mask(
    labels: np.ndarray,
    test_fraction: float,
    seed: int,
    where: str,
    classes: tuple[str, ...],
    unit: str = "rows",
) -> np.ndarray:
    """Boolean mask of the test samples: a seeded class-proportional `test_fraction` of them.

    Every class needs at least 2 samples and must keep one in train; a class may end up absent
    from the test split when its share rounds to 0.
    """
    present, counts = np.unique(labels, return_counts=True)
    if (counts < 2).any():
        few = [classes[int(c)] for c in present[counts < 2]]
        raise DatasetFormatError(
            f"{where}: classes {few} have a single {unit[:-1]}; the stratified train/test split "
            f"needs at least 2 {unit} per class: add {unit}, drop those classes, or give the "
            "split explicitly"
        )
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[stratified_indices(labels, float(test_fraction), np.random.default_rng(seed))] = True
    if not is_test.any():
        raise DatasetFormatError(
            f"{where}: test_fraction={test_fraction} of {len(labels)} {unit} leaves the test "
            "split empty; raise test_fraction"
        )
    lost = [classes[int(c)] for c in np.setdiff1d(present, labels[~is_test])]
    if len(lost):
        raise DatasetFormatError(
            f"{where}: test_fraction={test_fraction} puts every {unit[:-1]} of classes {lost} "
            "into the test split; lower test_fraction"
        )
    return is_test


def split_arrays(x: np.ndarray, y: np.ndarray, is_test: np.ndarray) -> dict[str, np.ndarray]:
    """`x_train, y_train, x_test, y_test` by a test mask, each split in the original order."""
    return {
        "x_train": np.ascontiguousarray(x[~is_test]),
        "y_train": y[~is_test],
        "x_test": np.ascontiguousarray(x[is_test]),
        "y_test": y[is_test],
    }
