"""Checks that a learner's outputs mean what the engines read them as: column j of
`predict_proba` is class j (also when a class is missing from the training data), `distill`
uses its sample weights, and the state after `distill` is the whole state. Each failure names
the method to fix."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from cosmosfl.learners.base import Learner
from cosmosfl.testing._support import (
    SAME_ATOL,
    _Data,
    _Failed,
    _fitted,
    _max_diff,
    _shifted_targets,
    _Skipped,
)

# Of a class's training rows, at least this share predicted as another single class (and this
# many more than as itself): that class's column is elsewhere, not merely poorly learnt.
MISPLACED_SHARE = 0.5


def misplaced_columns(probs: np.ndarray, y: np.ndarray) -> dict[int, int]:
    """{class: the column its rows mostly go to} where the columns are permuted, not merely
    confused: each such class goes mostly (MISPLACED_SHARE) to one other column, no two to the
    same one, that column's own class is absent from `y` or moved itself (a swap, a reversal,
    a cycle, columns packed past a missing class), and at least two classes move. A poorly
    trained model's mix-ups do not form such a pattern."""
    pred = probs.argmax(axis=1)
    present = set(np.unique(y).tolist())
    moved: dict[int, int] = {}
    for c in present:
        counts = np.bincount(pred[y == c], minlength=probs.shape[1])
        top = int(counts.argmax())
        if top != c and counts[top] >= MISPLACED_SHARE * counts.sum() and counts[top] > counts[c]:
            moved[int(c)] = top
    targets = list(moved.values())
    moved = {c: j for c, j in moved.items() if targets.count(j) == 1}
    changed = True
    while changed:  # keep only closed patterns: the column a class moved to is not in use
        kept = {c: j for c, j in moved.items() if j not in present or j in moved}
        changed, moved = kept != moved, kept
    return moved if len(moved) >= 2 else {}  # one class alone is a mix-up, not an order


def column_order_message(moved: dict[int, int], context: str) -> str:
    shown = ", ".join(f"class {c} in column {j}" for c, j in sorted(moved.items())[:4])
    return (
        f"predict_proba returns the classes out of order {context} ({shown}): fit learnt, but "
        "column j of predict_proba must be the probability of class j (e.g. reorder by the "
        "estimator's classes_), or every client's predictions are misread"
    )


def _check_column_order(make, data: _Data, *, seed: int, epochs: int, **_: Any) -> None:
    """A planted class permutation: trained on relabelled rows, column j must still be the
    (new) class j: a learner that sorts, swaps or reverses its columns is caught here."""
    m = data.num_classes
    perm = np.roll(np.arange(m), 1)  # class c -> c+1: no class keeps its label
    y = perm[data.y]
    learner = make(seed)
    learner.fit(data.x, y, epochs=epochs)
    moved = misplaced_columns(learner.predict_proba(data.x), y)
    if moved:
        raise _Failed(column_order_message(moved, "on its training rows"))


def _check_missing_class_columns(make, data: _Data, *, seed: int, epochs: int, **_: Any) -> None:
    """Trained without class 0, the learner still returns num_classes columns, each class in its
    own column (not packed to 0..k-1)."""
    m = data.num_classes
    keep = data.y != 0
    if m < 3 or keep.sum() < 2:
        raise _Skipped("needs at least 3 classes")
    x, y = data.x[keep], data.y[keep]
    learner = make(seed)
    try:
        learner.fit(x, y, epochs=epochs)
    except Exception as err:
        raise _Failed(
            f"fit on data without class 0 raised {type(err).__name__} ({err}): a client may hold "
            "only some of the classes; fit must accept labels that skip classes"
        ) from None
    probs = np.asarray(learner.predict_proba(x))
    if probs.shape != (len(x), m):
        raise _Failed(
            f"after fit on data without class 0, predict_proba returned shape {probs.shape}, "
            f"expected ({len(x)}, num_classes={m}): return a column for every class, zeros for "
            "classes the model never saw"
        )
    moved = misplaced_columns(probs, y)
    if moved:
        raise _Failed(
            column_order_message(moved, "after fit on data without class 0")
            + "; columns packed to 0..k-1 shift every later class"
        )


def _check_distill_uses_weights(
    make, data: _Data, *, seed: int, epochs: int, distill_epochs: int
) -> None:
    """distill(x, targets, weights) must use the weights, not only check their shape: down-
    weighting half the samples must change the result."""
    n = len(data.public)
    if n < 4:
        raise _Skipped("needs at least 4 public samples")
    base = _fitted(make, data, seed, epochs)
    declared = base.capabilities
    if not declared.soft_targets:  # it says it uses only the argmax
        raise _Skipped(declared.soft_targets_reason or "the learner ignores weights")
    targets = _shifted_targets(base.predict_proba(data.public))
    # the second half's targets point elsewhere, so weighting them down changes the optimum
    half = n // 2
    targets[half:] = np.roll(targets[half:], 1, axis=1)
    uneven = np.ones(n, dtype=np.float32)
    uneven[half:] = 0.01
    results = []
    for weights in (np.ones(n, dtype=np.float32), uneven):
        learner = _fitted(make, data, seed, epochs)
        learner.distill(data.public, targets, weights, epochs=distill_epochs, lam=0.0)
        results.append(learner.predict_proba(data.public))
    if np.allclose(results[0], results[1], atol=SAME_ATOL, rtol=0):
        raise _Failed(
            "distill gave the same model with all weights 1 and with half the samples weighted "
            "0.01: distill ignores its weights (after checking their shape); pass them to the "
            "loss (e.g. sample_weight, or a weighted mean of the per-sample loss)"
        )


def _check_state_after_distill(
    make, data: _Data, *, seed: int, epochs: int, distill_epochs: int
) -> None:
    """get_state after distill holds what distill set: restored into a new learner and trained
    on, it equals the original trained on (what --resume needs after a distilling round)."""
    learner = _fitted(make, data, seed, epochs)
    learner.distill(
        data.public,
        _shifted_targets(learner.predict_proba(data.public)),
        epochs=distill_epochs,
        lam=0.0,
    )
    try:
        state = learner.get_state()
    except NotImplementedError:
        raise _Skipped("get_state is not implemented (see state_round_trip)") from None
    distilled = learner.predict_proba(data.public)
    learner.fit(data.x, data.y, epochs=1)
    continued = learner.predict_proba(data.public)
    resumed: Learner = make(seed)
    resumed.set_state(copy.deepcopy(state))
    if not np.allclose(resumed.predict_proba(data.public), distilled, atol=SAME_ATOL, rtol=0):
        raise _Failed(
            "get_state after distill does not restore the distilled predictions (max "
            f"difference {_max_diff(resumed.predict_proba(data.public), distilled):.3g}): "
            "get_state must include everything distill changed"
        )
    resumed.fit(data.x, data.y, epochs=1)
    if not np.allclose(resumed.predict_proba(data.public), continued, atol=SAME_ATOL, rtol=0):
        raise _Failed(
            "get_state after distill leaves something out: restored and trained on, the "
            "learner differs from the original trained on (max difference "
            f"{_max_diff(resumed.predict_proba(data.public), continued):.3g}); put what "
            "distill keeps for later fits (e.g. the distilled targets) in get_state, or a "
            "resumed run differs from an uninterrupted one"
        )
