"""The client's gate on distillation: keep a step only when it does not hurt on private data.

A client holds a validation slice of its own training data (`data.validation_fraction`) that
no model trains on. Before a gated distillation it measures its model there, snapshots the
model (`get_state`, which includes the learner's random stream), distils each candidate
teacher it was sent from that same snapshot, and keeps the candidate that scores best on the
slice — only if that helps (`helps`: a higher accuracy, or an accuracy at most `margin`
lower with no higher log-loss). Otherwise it restores the snapshot, so a rejected step
leaves the model, and its random stream, exactly as they were: the client is where it would
be had it never been sent anything.

No teacher ever sees the validation slice, and nothing about it leaves the client but the
decision and two accuracies (scalars in the reply's metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cosmosfl.learners.base import accuracy_metrics

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

# A validation slice smaller than this cannot tell a good step from a bad one; the client then
# distils ungated and says so in its reply (`gate_rows`, `gate_open` = 1).
MIN_GATE_ROWS = 5


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
    and keep the best on the validation slice, or none; returns the metrics of the step kept
    (or of the first candidate's, when none is) with the gate's decision:

    - `gate_kept`: 1 when a candidate was kept, 0 when the model was restored;
    - `gate_choice`: the index of the candidate kept (-1: none);
    - `gate_val_before` / `gate_val_after`: validation accuracy before and of the best
      candidate (`gate_loss_*`: their log-loss);
    - `gate_rows`: rows in the slice; `gate_open`: 1 when the slice was too small to judge.
    """
    learner = client.learner
    val = validation_slice(client)
    rows = 0 if val is None else len(val[1])
    if rows < MIN_GATE_ROWS:
        metrics = distil(candidates[0])
        return {
            **metrics,
            "gate_kept": 1.0,
            "gate_choice": 0.0,
            "gate_rows": float(rows),
            "gate_open": 1.0,
        }
    x_val, y_val = val  # type: ignore[misc]
    before = _score(learner, x_val, y_val)
    start = learner.get_state()
    tried: list[tuple[tuple[float, float], Any, dict[str, float]]] = []
    for i, targets in enumerate(candidates):
        if i:
            learner.set_state(start)
        metrics = distil(targets)
        state = learner.get_state() if len(candidates) > 1 else None
        tried.append((_score(learner, x_val, y_val), state, metrics))
    # Higher accuracy first, then lower log-loss; ties go to the earlier candidate.
    choice = max(range(len(tried)), key=lambda i: (tried[i][0][0], -tried[i][0][1], -i))
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
        "gate_val_before": before[0],
        "gate_val_after": after[0],
        "gate_loss_before": before[1],
        "gate_loss_after": after[1],
        "gate_rows": float(rows),
        "gate_open": 0.0,
    }


def helps(before: tuple[float, float], after: tuple[float, float], margin: float) -> bool:
    """Whether a model scoring `after` (validation accuracy, log-loss) is worth keeping over
    one scoring `before`: a higher accuracy, or one at most `margin` lower whose log-loss is
    no higher. On a slice of a dozen rows accuracy alone ties often while the model got worse
    (measured on digits: a tie on 11 rows hid a 32-point test loss); the log-loss breaks them."""
    acc_before, loss_before = before
    acc_after, loss_after = after
    if acc_after > acc_before:
        return True
    return acc_after >= acc_before - margin and loss_after <= loss_before


# The weights α of the client's own model tried for a deployed mix α·own + (1 − α)·other.
MIX_WEIGHTS = tuple(i / 10 for i in range(11))


def deployed_mix(
    client: Participant, other_validation: np.ndarray, other_test: np.ndarray, split: str
) -> dict[str, float]:
    """The metrics on `split` of α·own + (1 − α)·other, α from MIX_WEIGHTS chosen on the
    validation slice (highest accuracy, then lowest log-loss, then the largest α: the own
    model unless the other one measurably helps), with `alpha` = the α chosen. Without a
    validation slice of MIN_GATE_ROWS rows, α = 1: the client's own model."""
    learner = client.learner
    x_test, y_test = client.split(split)
    val = validation_slice(client)
    alpha = 1.0
    if val is not None and len(val[1]) >= MIN_GATE_ROWS:
        own_val = np.asarray(learner.predict_proba(val[0]), dtype=np.float64)
        other_val = np.asarray(other_validation, dtype=np.float64)
        scores = [
            (*_probs_score(a * own_val + (1 - a) * other_val, val[1]), a) for a in MIX_WEIGHTS
        ]
        alpha = max(scores, key=lambda s: (s[0], -s[1], s[2]))[2]
    own = np.asarray(learner.predict_proba(x_test), dtype=np.float64)
    mix = alpha * own + (1 - alpha) * np.asarray(other_test, dtype=np.float64)
    return {**accuracy_metrics(mix, y_test), "alpha": float(alpha)}


def _probs_score(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    y = np.asarray(y)
    picked = np.clip(p[np.arange(len(y)), y], 1e-12, 1.0)
    return float((p.argmax(axis=1) == y).mean()), float(-np.log(picked).mean())


def _score(learner: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(accuracy, mean log-loss) of `learner` on (x, y)."""
    return _probs_score(np.asarray(learner.predict_proba(x), dtype=np.float64), y)


__all__ = [
    "MIN_GATE_ROWS",
    "MIX_WEIGHTS",
    "deployed_mix",
    "gated_distill",
    "helps",
    "validation_slice",
]
