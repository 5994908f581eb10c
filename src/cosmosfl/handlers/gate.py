"""The client's gate on distillation: keep a step only when it does not hurt on private data.

A client holds a validation slice of its own training data (`data.validation_fraction`) that
no model trains on. Before a gated distillation it measures its model there, snapshots the
model (`get_state`, which includes the learner's random stream), distils each candidate
teacher it was sent from that same snapshot, and keeps the candidate that scores best on the
slice — only if that helps (`helps`: an accuracy at most `margin` lower, and a log-loss or
accuracy better by more than GATE_Z standard errors of the per-row differences). Otherwise
it restores the snapshot, so a rejected step leaves the model, and its random stream, exactly
as they were: the client is where it would be had it never been sent anything. A slice too
small to judge keeps the model as it is.

No teacher ever sees the validation slice, and nothing about it leaves the client but the
decision and two accuracies (scalars in the reply's metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from cosmosfl.learners.base import accuracy_metrics

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

# A validation slice smaller than this cannot tell a good step from a bad one: the client then
# keeps its model (it has no evidence that the step helps) and says so (`gate_unjudged`).
MIN_GATE_ROWS = 5
# How sure the gate must be that a step helps: the mean per-row improvement of the validation
# log-loss (or accuracy) must exceed GATE_Z standard errors. On a slice of a dozen rows only a
# clear improvement passes; on hundreds, a small one does. Measured on digits with 30 clients
# (7-8 validation rows each): without it, steps that tied on accuracy and happened to lower the
# loss were kept, and 24 % of clients ended more than a point below `local`.
GATE_Z = 1.0
# The weights α of the client's own model tried for a deployed mix α·own + (1 − α)·other.
MIX_WEIGHTS = tuple(i / 10 for i in range(11))
# How sure the mix must be: ten weights are tried, and with GATE_Z each of them has about a
# one-in-six chance of passing on noise alone, so some weight passed on a tiny slice whether
# the other model helped or not (digits, 30 clients, 7-8 validation rows each: 10 % of
# clients ended more than a point below `local`). A stricter bar for the search keeps α = 1
# there and still passes a teacher that is clearly better (see docs/cosmos.md, "Measured").
MIX_Z = 2.0


class Rows(NamedTuple):
    """Per validation row: whether the model is right, and its log-loss."""

    correct: np.ndarray
    loss: np.ndarray

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean())

    @property
    def mean_loss(self) -> float:
        return float(self.loss.mean())


def validation_slice(client: Participant) -> tuple[np.ndarray, np.ndarray] | None:
    """The client's validation slice, or None when it has none."""
    try:
        return client.split("validation")
    except ValueError:
        return None


def gated_distill(
    client: Participant,
    candidates: Sequence[np.ndarray],
    distil: Callable[[np.ndarray], dict[str, float]],
    margin: float,
) -> dict[str, float]:
    """Distil from each of `candidates` (target matrices on U) from the same starting state
    and keep the best on the validation slice if it helps (`helps`), else none; returns the
    metrics of the step kept (or of the best candidate's, when none is) with the decision:

    - `gate_kept`: 1 when a candidate was kept, 0 when the model was restored;
    - `gate_choice`: the index of the candidate kept (-1: none);
    - `gate_val_before` / `gate_val_after`: validation accuracy before and of the best
      candidate (`gate_loss_*`: their mean log-loss);
    - `gate_rows`: rows in the slice; `gate_unjudged`: 1 when the slice was too small to
      judge (the model is then left as it was, and nothing is distilled).
    """
    learner = client.learner
    val = validation_slice(client)
    rows = 0 if val is None else len(val[1])
    if rows < MIN_GATE_ROWS:
        return {
            "gate_kept": 0.0,
            "gate_choice": -1.0,
            "gate_rows": float(rows),
            "gate_unjudged": 1.0,
        }
    x_val, y_val = val  # type: ignore[misc]
    before = _rows(learner.predict_proba(x_val), y_val)
    start = learner.get_state()
    tried: list[tuple[Rows, Any, dict[str, float]]] = []
    for i, targets in enumerate(candidates):
        if i:
            learner.set_state(start)
        metrics = distil(targets)
        state = learner.get_state() if len(candidates) > 1 else None
        tried.append((_rows(learner.predict_proba(x_val), y_val), state, metrics))
    # Higher accuracy first, then lower log-loss; ties go to the earlier candidate.
    choice = max(
        range(len(tried)), key=lambda i: (tried[i][0].accuracy, -tried[i][0].mean_loss, -i)
    )
    after, state, metrics = tried[choice]
    kept = helps(before, after, margin)
    if not kept:
        learner.set_state(start)
    elif state is not None and choice != len(tried) - 1:
        learner.set_state(state)
    return {
        **metrics,
        "gate_kept": float(kept),
        "gate_choice": float(choice if kept else -1),
        "gate_val_before": before.accuracy,
        "gate_val_after": after.accuracy,
        "gate_loss_before": before.mean_loss,
        "gate_loss_after": after.mean_loss,
        "gate_rows": float(rows),
        "gate_unjudged": 0.0,
    }


def helps(before: Rows, after: Rows, margin: float, z: float = GATE_Z) -> bool:
    """Whether a model scoring `after` on the validation rows is worth keeping over one
    scoring `before`: its accuracy is at most `margin` lower, and its log-loss or its
    accuracy is better by more than `z` standard errors of the paired per-row differences.
    The standard error shrinks with the slice, so the margin of doubt accounts for its size."""
    if after.accuracy < before.accuracy - margin:
        return False
    return _better(before.loss - after.loss, z) or _better(
        after.correct.astype(np.float64) - before.correct, z
    )


def _better(gain: np.ndarray, z: float) -> bool:
    """Whether the mean of the paired per-row `gain` is above z standard errors."""
    n = len(gain)
    if n < 2:
        return False
    se = float(np.std(gain, ddof=1)) / np.sqrt(n)
    return float(gain.mean()) > z * se and float(gain.mean()) > 0


def deployed_mix(
    client: Participant, other_validation: np.ndarray, other_test: np.ndarray, split: str
) -> dict[str, float]:
    """The metrics on `split` of α·own + (1 − α)·other, with α = 1 (the own model) unless
    some α of MIX_WEIGHTS beats it on the validation slice by `helps`' rule at MIX_Z standard
    errors (then the α of lowest validation log-loss among those), and `alpha` = the α
    chosen. Without a slice of MIN_GATE_ROWS rows, α = 1."""
    learner = client.learner
    x_test, y_test = client.split(split)
    val = validation_slice(client)
    alpha = 1.0
    if val is not None and len(val[1]) >= MIN_GATE_ROWS:
        own_val = np.asarray(learner.predict_proba(val[0]), dtype=np.float64)
        other_val = np.asarray(other_validation, dtype=np.float64)
        own_rows = _rows(own_val, val[1])
        better = [
            (rows.mean_loss, a)
            for a in MIX_WEIGHTS[:-1]
            if helps(own_rows, rows := _rows(a * own_val + (1 - a) * other_val, val[1]), 0.0, MIX_Z)
        ]
        if better:
            alpha = min(better)[1]
    own = np.asarray(learner.predict_proba(x_test), dtype=np.float64)
    mix = alpha * own + (1 - alpha) * np.asarray(other_test, dtype=np.float64)
    return {**accuracy_metrics(mix, y_test), "alpha": float(alpha)}


def _rows(probs: np.ndarray, y: np.ndarray) -> Rows:
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y)
    picked = np.clip(p[np.arange(len(y)), y], 1e-12, 1.0)
    return Rows(p.argmax(axis=1) == y, -np.log(picked))


__all__ = [
    "GATE_Z",
    "MIN_GATE_ROWS",
    "MIX_WEIGHTS",
    "MIX_Z",
    "Rows",
    "deployed_mix",
    "gated_distill",
    "helps",
    "validation_slice",
]
