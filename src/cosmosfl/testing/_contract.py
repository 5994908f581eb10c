"""The checks of the Learner contract itself: fit, predict_proba, determinism, distill,
checkpoints, shape errors, inputs left unchanged (each named check_<what>; reports use <what>)."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cosmosfl.core.protocol import PROBS, SIMPLEX_ATOL
from cosmosfl.learners.base import Learner
from cosmosfl.testing._columns import column_order_message, misplaced_columns
from cosmosfl.testing._support import (
    SAME_ATOL,
    _Data,
    _disturb_global_rng,
    _Failed,
    _fitted,
    _kl,
    _max_diff,
    _shifted_targets,
    _Skipped,
)


def _check_is_learner(learner: Any) -> None:
    if not isinstance(learner, Learner):
        raise _Failed(
            f"{type(learner).__name__} is not a cosmosfl.Learner: subclass "
            "cosmosfl.learners.Learner and implement fit, predict_proba and distill"
        )
    m = getattr(learner, "num_classes", None)
    if not isinstance(m, int | np.integer) or isinstance(m, bool) or m < 2:
        raise _Failed(
            f"num_classes is {m!r}: set self.num_classes to the number of classes (an int >= 2) "
            "in __init__"
        )


def _check_fit_learns(make, data: _Data, *, seed: int, epochs: int, **_: Any) -> None:
    learner = make(seed)
    metrics = learner.fit(data.x, data.y, epochs=epochs)
    if not isinstance(metrics, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int | float | np.number) for k, v in metrics.items()
    ):
        raise _Failed(
            f"fit returned {metrics!r}: return a dict of metric name -> number (e.g. "
            '{"loss": 0.3}; an empty dict is fine)'
        )
    probs = learner.predict_proba(data.x)
    top1 = float((np.asarray(probs).argmax(axis=1) == data.y).mean())
    chance = 1.0 / data.num_classes
    moved = misplaced_columns(np.asarray(probs), data.y) if top1 <= 1.5 * chance else {}
    if moved:  # fit learnt; predict_proba reads the classes out in another order
        raise _Failed(column_order_message(moved, "on its training rows"))
    if top1 <= 1.5 * chance:
        raise _Failed(
            f"after fit({epochs} epochs) the training accuracy is {top1:.3f}, near chance "
            f"({chance:.3f}): fit must train on (x, y); if it needs more epochs, pass "
            "check_learner(..., epochs=N)"
        )


def _check_predict_proba(make, data: _Data, *, seed: int, epochs: int, **_: Any) -> None:
    learner = _fitted(make, data, seed, epochs)
    n, m = len(data.public), data.num_classes
    for rows in (data.public, data.public[:1]):
        probs = learner.predict_proba(rows)
        if not isinstance(probs, np.ndarray):
            raise _Failed(f"predict_proba returned {type(probs).__name__}: return a numpy array")
        if probs.shape != (len(rows), m):
            raise _Failed(
                f"predict_proba on {len(rows)} samples returned shape {probs.shape}, expected "
                f"({len(rows)}, num_classes={m}): one row per sample, one column per class "
                "(also for classes the model never saw in training)"
            )
        if str(probs.dtype) not in PROBS.dtypes:
            raise _Failed(
                f"predict_proba returned dtype {probs.dtype}: return float32 (the protocol "
                f"accepts {', '.join(PROBS.dtypes)})"
            )
        if not np.isfinite(probs).all() or (probs < 0).any():
            raise _Failed("predict_proba returned NaN, inf or negative values: return softmax")
        worst = float(np.abs(probs.astype(np.float64).sum(axis=1) - 1.0).max())
        if worst > SIMPLEX_ATOL:
            raise _Failed(
                f"predict_proba rows sum to 1 ± {worst:.3g} (allowed ± {SIMPLEX_ATOL}): "
                "normalise them (softmax of logits, or divide by the row sum)"
            )
    if n and not np.array_equal(
        learner.predict_proba(data.public), learner.predict_proba(data.public)
    ):
        raise _Failed(
            "two predict_proba calls on the same inputs differ: predict in evaluation mode "
            "(model.eval(), no dropout or augmentation) and without training"
        )


def _check_seeded_determinism(
    make, data: _Data, *, seed: int, epochs: int, distill_epochs: int
) -> None:
    runs = []
    for k in range(2):
        _disturb_global_rng(k)
        learner = make(seed)
        _disturb_global_rng(k + 10)
        learner.fit(data.x, data.y, epochs=epochs)
        after_fit = learner.predict_proba(data.public)
        learner.distill(data.public, _shifted_targets(after_fit), epochs=distill_epochs)
        runs.append((after_fit, learner.predict_proba(data.public)))
    for step, a, b in (("fit", runs[0][0], runs[1][0]), ("distill", runs[0][1], runs[1][1])):
        if not np.allclose(a, b, atol=SAME_ATOL, rtol=0):
            raise _Failed(
                f"two learners built with seed {seed} predict differently after the same {step} "
                f"(max difference {_max_diff(a, b):.3g}) when the global random state differs: "
                "seed the model's initialisation from the seed in your factory (e.g. "
                "torch.manual_seed(seed) before building the network) and draw shuffling, "
                "dropout and augmentation from a generator the learner owns (TorchLearner(..., "
                "seed=seed) does), so results do not depend on the order clients are served in"
            )


def _check_distill_moves_toward_targets(
    make, data: _Data, *, seed: int, epochs: int, distill_epochs: int
) -> None:
    for weighted in (False, True):
        learner = _fitted(make, data, seed, epochs)
        before = learner.predict_proba(data.public)
        targets = _shifted_targets(before)
        weights = np.ones(len(data.public), dtype=np.float32) if weighted else None
        metrics = learner.distill(data.public, targets, weights, epochs=distill_epochs, lam=0.0)
        if not isinstance(metrics, Mapping):
            raise _Failed(f"distill returned {metrics!r}: return a dict of metric name -> number")
        after = learner.predict_proba(data.public)
        kl_before, kl_after = _kl(targets, before), _kl(targets, after)
        if not kl_after < kl_before:
            how = "with weights=1" if weighted else "without weights"
            raise _Failed(
                f"distill({distill_epochs} epochs, {how}) did not move predictions toward the "
                f"targets: KL(targets || predictions) {kl_before:.4f} before, {kl_after:.4f} "
                "after. distill must fit predict_proba(x) to the soft targets (e.g. minimise "
                "KL); with a small learning rate pass check_learner(..., distill_epochs=N)"
            )


def _check_state_round_trip(make, data: _Data, *, seed: int, epochs: int, **_: Any) -> None:
    learner = _fitted(make, data, seed, epochs)
    try:
        state = learner.get_state()
    except NotImplementedError:
        raise _Skipped(
            "get_state is not implemented: runs with this learner cannot be checkpointed or "
            "resumed (implement get_state/set_state to allow it)"
        ) from None
    saved = learner.predict_proba(data.public)
    try:
        pickle.dumps(state)
    except Exception as err:
        raise _Failed(
            f"the state from get_state does not pickle ({type(err).__name__}: {err}): "
            "checkpoints are pickles; return arrays, tensors and plain containers"
        ) from None
    learner.fit(data.x, data.y, epochs=1)
    continued = learner.predict_proba(data.public)
    learner.set_state(state)
    if not np.allclose(learner.predict_proba(data.public), saved, atol=SAME_ATOL, rtol=0):
        raise _Failed(
            "set_state(get_state()) after more training does not restore the predictions: "
            "get_state must return a copy (e.g. copy.deepcopy of the weights), not references "
            "to the live model"
        )
    other = make(seed + 1)
    other.set_state(copy.deepcopy(state))
    if not np.allclose(other.predict_proba(data.public), saved, atol=SAME_ATOL, rtol=0):
        raise _Failed(
            "a learner built with another seed predicts differently after set_state(state): "
            "the state must hold everything that determines the predictions"
        )
    # Resuming rebuilds the learner from the same settings (and seed), then loads the state.
    resumed = make(seed)
    resumed.set_state(copy.deepcopy(state))
    resumed.fit(data.x, data.y, epochs=1)
    if not np.allclose(resumed.predict_proba(data.public), continued, atol=SAME_ATOL, rtol=0):
        raise _Failed(
            "a learner built with the same seed, given set_state(state) and trained on, differs "
            "from the original learner trained on: "
            "put the learner's random generator state in get_state too, so a resumed run "
            "equals an uninterrupted one"
        )


def _check_bad_shapes_raise(make, data: _Data, *, seed: int, epochs: int, **_: Any) -> None:
    m, xp = data.num_classes, data.public
    good = np.full((len(xp), m), 1.0 / m, dtype=np.float32)
    cases: list[tuple[str, Callable[[Learner], Any]]] = [
        ("fit(x, y[:-1])", lambda lr: lr.fit(data.x, data.y[:-1], epochs=1)),
        ("fit(x, y + num_classes)", lambda lr: lr.fit(data.x, data.y + m, epochs=1)),
        ("distill(x, targets[:-1])", lambda lr: lr.distill(xp, good[:-1], epochs=1)),
        (
            "distill(x, targets with num_classes + 1 columns)",
            lambda lr: lr.distill(xp, np.full((len(xp), m + 1), 1 / (m + 1), np.float32)),
        ),
        (
            "distill(x, targets, weights[:-1])",
            lambda lr: lr.distill(xp, good, np.ones(len(xp) - 1, np.float32), epochs=1),
        ),
    ]
    for call, run in cases:
        learner = _fitted(make, data, seed, epochs)
        try:
            run(learner)
        except ValueError:
            continue
        except Exception as err:
            raise _Failed(
                f"{call} raised {type(err).__name__} ({err}) instead of ValueError: check "
                "shapes first (cosmosfl.learners.validate_fit_inputs / validate_distill_inputs) "
                "so the error names the shapes"
            ) from None
        raise _Failed(
            f"{call} did not raise: check shapes before training (cosmosfl.learners."
            "validate_fit_inputs / validate_distill_inputs raise a ValueError naming them)"
        )


def _check_inputs_unchanged(
    make, data: _Data, *, seed: int, epochs: int, distill_epochs: int
) -> None:
    x, y, public = data.x.copy(), data.y.copy(), data.public.copy()
    learner = make(seed)
    learner.fit(data.x, data.y, epochs=1)
    targets = _shifted_targets(learner.predict_proba(data.public))
    kept = targets.copy()
    weights = np.ones(len(public), dtype=np.float32)
    learner.distill(data.public, targets, weights, epochs=1)
    for what, now, before in (
        ("x", data.x, x),
        ("y", data.y, y),
        ("the public inputs", data.public, public),
        ("targets", targets, kept),
        ("weights", weights, np.ones(len(public), dtype=np.float32)),
    ):
        if not np.array_equal(now, before):
            raise _Failed(
                f"{what} changed during fit/predict_proba/distill: copy arrays before "
                "modifying them (the engine passes the client's own data)"
            )
