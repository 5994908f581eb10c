"""Conformance checks for your own `Learner` and `Algorithm`, like scikit-learn's
`check_estimator`: `check_learner` below, and `check_algorithm` (testing/_algorithm.py).

Run `check_learner` in your test suite on a learner you wrote (or on a `TorchLearner` wrapping
your network) before putting it in a federation:

```python
from cosmosfl.testing import check_learner

def make(seed: int) -> MyLearner:
    return MyLearner(seed=seed)

check_learner(make, input_shape=(1, 8, 8))   # images; input_shape=(20,) for feature vectors
```

Every check runs unless a check it needs failed (then it is listed as skipped, with why); if
any fails, one `LearnerCheckError` (an AssertionError) lists each failure with what was
observed and how to fix it.

For an algorithm of your own, give `check_algorithm` an instance with small settings:

```python
from cosmosfl.testing import check_algorithm

check_algorithm(MyAlgo(pretrain_epochs=1, local_epochs=1))   # AlgorithmCheckError if not
```

This package is for test suites, so it sits above the layers it checks (the engines, the
experiment layer's checkpoints, the Flower apps); nothing in cosmosfl imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from cosmosfl.learners.base import Learner
from cosmosfl.testing._algorithm import (
    ALGORITHM_CHECKS,
    AlgorithmCheckError,
    AlgorithmCheckReport,
    check_algorithm,
)
from cosmosfl.testing._columns import (
    _check_column_order,
    _check_distill_uses_weights,
    _check_missing_class_columns,
    _check_state_after_distill,
)
from cosmosfl.testing._contract import (
    _check_bad_shapes_raise,
    _check_distill_moves_toward_targets,
    _check_fit_learns,
    _check_inputs_unchanged,
    _check_is_learner,
    _check_predict_proba,
    _check_seeded_determinism,
    _check_state_round_trip,
)
from cosmosfl.testing._knowledge import (
    _check_distill_with_consistency,
    _check_distilled_knowledge_survives_fit,
    _check_soft_targets_matter,
)
from cosmosfl.testing._support import (
    CheckError,
    _data,
    _factory,
    _Failed,
    _global_rng_restored,
    run_check,
)

__all__ = [
    "ALGORITHM_CHECKS",
    "CHECKS",
    "AlgorithmCheckError",
    "AlgorithmCheckReport",
    "LearnerCheckError",
    "LearnerCheckReport",
    "check_algorithm",
    "check_learner",
]


class LearnerCheckError(CheckError):
    """One or more conformance checks failed; `failures` maps each check to its message, and
    `skipped` each check not run to why (a check it needs failed)."""

    subject = "learner check(s)"
    not_run = "Not run (fix the failures above first):"


@dataclass
class LearnerCheckReport:
    """What `check_learner` ran: the checks that `passed`, and the `skipped` ones with why."""

    learner: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


# (check, the checks it needs): a check whose needs failed is skipped, not run into confusing
# failures. Order: what a check needs comes before it.
_PLAN: tuple[tuple[Callable[..., None], tuple[str, ...]], ...] = (
    (_check_fit_learns, ()),
    (_check_predict_proba, ()),
    (_check_seeded_determinism, ("predict_proba",)),
    (_check_distill_moves_toward_targets, ("predict_proba",)),
    (_check_distill_with_consistency, ("predict_proba",)),
    (_check_soft_targets_matter, ("predict_proba", "distill_moves_toward_targets")),
    (
        _check_distilled_knowledge_survives_fit,
        ("fit_learns", "predict_proba", "distill_moves_toward_targets"),
    ),
    (_check_state_round_trip, ("predict_proba",)),
    (_check_column_order, ("predict_proba",)),
    (_check_missing_class_columns, ("predict_proba",)),
    (_check_distill_uses_weights, ("predict_proba", "distill_moves_toward_targets")),
    (_check_state_after_distill, ("predict_proba", "state_round_trip")),
    (_check_bad_shapes_raise, ()),
    (_check_inputs_unchanged, ("predict_proba",)),
)
CHECKS: tuple[str, ...] = tuple(check.__name__[7:] for check, _ in _PLAN)
"""The names of the checks, in the order they run (`LearnerCheckReport.passed` order)."""


def check_learner(
    learner: Learner | Callable[[int], Learner],
    x: np.ndarray | None = None,
    y: np.ndarray | None = None,
    *,
    input_shape: tuple[int, ...] = (1, 8, 8),
    epochs: int = 3,
    distill_epochs: int = 10,
    seed: int = 0,
) -> LearnerCheckReport:
    """Check that a learner honours the `Learner` contract the engines rely on, and gains from
    distillation.

    `learner` is an unfitted learner (copied for every check) or, better, a function
    `seed -> Learner` that builds one, seeding everything random in it (weight initialisation
    included) from `seed`. The data is `x`, `y` (labels in [0, num_classes)) or, when not
    given, a small synthetic classification problem with inputs of `input_shape`: (C, H, W)
    images by default, `(D,)` for feature vectors (tabular records, embeddings).

    Checks (`CHECKS`): the learner is a `Learner` with `num_classes`; `fit` returns metrics
    and learns; `predict_proba` gives float (n, num_classes) rows on the simplex, also for one
    sample; the same seed gives the same predictions after `fit` and `distill` whatever the
    global random state; `distill` (with and without weights) moves predictions toward its
    targets; `distill` with lam=5 (the consistency term) runs on these inputs; the soft mass of
    the targets matters, not only their argmax (skipped for a learner whose `capabilities`
    declare `soft_targets=False`, with their `soft_targets_reason`); what `distill` taught
    survives the next `fit`; the state from `get_state` restores the predictions and the
    continuation (as resuming a run needs) and pickles, also after `distill`; column j of
    `predict_proba` is class j (a planted class permutation; training data missing a class);
    `distill` uses its weights; inputs are not modified; mismatched shapes raise ValueError.
    Every failure names the method to fix. A check whose prerequisite failed is skipped and listed.

    Raises LearnerCheckError listing every failed (and skipped) check; returns a
    LearnerCheckReport.
    """
    make = _factory(learner)
    with _global_rng_restored():
        first = make(seed)
        name = type(first).__name__
        report = LearnerCheckReport(name)
        failures: dict[str, str] = {}
        blocked: dict[str, str] = {}
        try:
            _check_is_learner(first)
        except _Failed as err:
            raise LearnerCheckError(name, {"is_learner": str(err)}) from None
        data = _data(x, y, first.num_classes, input_shape, seed)
        for check, needs in _PLAN:
            what = check.__name__[7:]
            run_check(
                what,
                lambda check=check: check(
                    make, data, seed=seed, epochs=epochs, distill_epochs=distill_epochs
                ),
                needs,
                failures,
                blocked,
                report,
            )
        report.skipped.update(blocked)
    if failures:
        raise LearnerCheckError(name, failures, blocked)
    return report
