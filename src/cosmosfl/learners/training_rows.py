"""The rows a refit learner trains on: private labels plus soft targets on the public set.

A refit trains on the union of the private rows (one-hot targets, weight 1) and the remembered
public rows (soft targets, weight × `public_weight`). Learners that take soft targets directly
(the boosters' softmax objective) use those N unique rows as they are; estimators that take only
hard labels learn them as *weighted copies*, one per (row, class). The copies are kept as indices
into the unique rows, so every check of a model predicts each unique row once and reads the
copies' probabilities from there, and the copies' inputs are built only for the estimator that
trains on them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

# Copies of a public row whose weight is below this are dropped (they carry no information
# but cost training time): with M classes at most M * 1e-3 of a row's mass is lost. Only the
# copies route drops mass; a learner taking soft targets directly keeps all of it.
MIN_TARGET_MASS = 1e-3


def soft_copy_index(
    targets: np.ndarray, weights: np.ndarray, min_mass: float = MIN_TARGET_MASS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, class, weight) of each weighted copy: row i, class c with weight
    targets[i, c] * weights[i], copies under `min_mass` dropped, in (row, class) order."""
    mass = np.asarray(targets, np.float64) * np.asarray(weights, np.float64)[:, None]
    rows, cols = np.nonzero(mass >= min_mass)
    return rows, cols.astype(np.int64), mass[rows, cols]


def soft_copies(
    x: np.ndarray, targets: np.ndarray, weights: np.ndarray, min_mass: float = MIN_TARGET_MASS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row i becomes one copy per class c with weight targets[i, c] * weights[i], copies
    under `min_mass` dropped: weighted log-loss on these copies is the soft-label cross-entropy.
    Rows come out in (row, class) order, so the result is deterministic."""
    rows, cols, mass = soft_copy_index(targets, weights, min_mass)
    return x[rows], cols, mass


def hard_copy_index(
    targets: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, argmax label, weight) of one copy per row with non-zero weight."""
    keep = np.nonzero(np.asarray(weights) > 0)[0]
    return keep, np.asarray(targets).argmax(axis=1)[keep].astype(np.int64), weights[keep]


def hard_copies(
    x: np.ndarray, targets: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One copy per row with the targets' argmax label (for estimators that ignore weights);
    rows with zero weight are left out, as the weighted path would."""
    rows, labels, w = hard_copy_index(targets, weights)
    return x[rows], labels, w


@dataclass(frozen=True)
class TrainingRows:
    """The unique rows of a refit (private rows first) and their weighted copies.

    `x`, `targets` (rows on the simplex; one-hot for private rows) and `weights` describe the N
    unique rows; `index`, `y` and `w` the copies (unique row, label, weight), which are the
    private rows themselves followed by the public rows' copies.
    """

    x: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    index: np.ndarray
    y: np.ndarray
    w: np.ndarray
    private_rows: int

    def copies_x(self) -> np.ndarray:
        """The copies' inputs, built on demand (an estimator that needs them trains on them)."""
        return self.x[self.index]


def training_rows(
    private: tuple[np.ndarray, np.ndarray] | None,
    public: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    public_weight: float,
    num_classes: int,
    copy_index: Any,
) -> TrainingRows:
    """The rows of a refit on `private` (x, y) and `public` (x, targets, weights);
    `copy_index(targets, weights)` gives the public rows' copies (row, label, weight)."""
    xs, ts, ws, index, ys, cw = [], [], [], [], [], []
    n_private = 0
    if private is not None:
        xp, yp = private
        n_private = len(yp)
        xs.append(xp)
        ts.append(np.eye(num_classes)[yp])
        ws.append(np.ones(n_private))
        index.append(np.arange(n_private))
        ys.append(yp)
        cw.append(np.ones(n_private))
    if public is not None:
        xu, tu, wu = public
        wu = wu * public_weight
        rows, labels, w = copy_index(tu, wu)
        xs.append(xu)
        ts.append(np.asarray(tu, np.float64))
        ws.append(np.asarray(wu, np.float64))
        index.append(n_private + np.asarray(rows, np.int64))
        ys.append(labels)
        cw.append(w)
    if not xs:
        raise ValueError("nothing to train on: call fit with labelled data first")
    y = np.concatenate(ys)
    if len(y) == 0:
        raise ValueError("no training rows left: every public weight is 0 and no private data")
    return TrainingRows(
        x=np.concatenate(xs),
        targets=np.concatenate(ts),
        weights=np.concatenate(ws),
        index=np.concatenate(index),
        y=y,
        w=np.concatenate(cw),
        private_rows=n_private,
    )


def fingerprint(*parts: Any) -> str:
    """A digest of arrays and plain values: equal inputs give equal digests (shape and dtype
    count, so a float32 and a float64 copy of the same numbers differ)."""
    h = hashlib.blake2b(digest_size=20)
    for part in parts:
        if part is None:
            h.update(b"\x00none")
        elif isinstance(part, np.ndarray):
            a = np.ascontiguousarray(part)
            h.update(f"\x01{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        elif isinstance(part, tuple | list):
            h.update(f"\x02{len(part)}".encode())
            h.update(fingerprint(*part).encode())
        else:
            h.update(f"\x03{part!r}".encode())
    return h.hexdigest()
