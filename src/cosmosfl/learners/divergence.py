"""The divergence guard of refit learners: what a refit's model is measured on, when it counts
as diverged, and what the client is told.

A refit diverged if its probabilities are not finite, or if its private accuracy falls more
than `tolerance` below max(previous model, majority class) *and* it fails its own training
rows too (weighted accuracy no better than their most common class, or weighted log-loss worse
than predicting their class frequencies). A refit that falls that far but fits its training
rows is deployed with a warning: the targets conflict with the private labels.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from cosmosfl.learners.training_rows import TrainingRows

# Default for `divergence_tolerance`: how far (in accuracy, absolute) a refit may fall below
# max(previous model, majority-class baseline) on the client's own labelled data before it is
# suspected of divergence. Distillation toward a cluster's classes legitimately costs a few
# points of private accuracy; a diverged fit loses tens (HistGradientBoosting: 0.88 -> 0.23,
# which also fit its own training rows no better than a constant).
DIVERGENCE_TOLERANCE = 0.2


@dataclass(frozen=True)
class Judged:
    """What the divergence guard measured of a model on its training rows."""

    finite: bool
    private: float  # accuracy on the private rows (nan without them)
    rows: float  # weighted accuracy on the training copies
    loss: float  # weighted log-loss on the training copies
    probs: np.ndarray | None  # (unique rows, M) probabilities, reused by distill's metrics

    def attempt(self, scale: float) -> str:
        """One line of the warning: what a try at learning-rate scale `scale` measured."""
        if not self.finite:
            return f"scale {scale:g}: non-finite probabilities"
        return (
            f"scale {scale:g}: private {self.private:.3f}, training rows {self.rows:.3f} "
            f"(log-loss {self.loss:.3g})"
        )


def judge(probs: np.ndarray, rows: TrainingRows, has_private: bool) -> Judged:
    """Finite probabilities, private accuracy, weighted accuracy and weighted log-loss on the
    training copies, from `probs`, one prediction of each unique row of `rows`."""
    probs = np.asarray(probs, np.float64)
    if not np.isfinite(probs).all():
        return Judged(False, float("nan"), float("nan"), float("inf"), None)
    top = probs.argmax(axis=1)
    hit = top[rows.index] == rows.y
    row_acc = float(rows.w[hit].sum() / rows.w.sum())
    picked = np.clip(probs[rows.index, rows.y], 1e-12, None)
    loss = float(-(rows.w * np.log(picked)).sum() / rows.w.sum())
    if not has_private:
        return Judged(True, float("nan"), row_acc, loss, probs)
    n = rows.private_rows
    private = float((top[:n] == rows.y[:n]).mean()) if n else float("nan")
    # Private rows but no accuracy on them (none at all) counts as a failed check.
    return Judged(bool(n), private, row_acc, loss, probs)


@dataclass(frozen=True)
class DivergenceRule:
    """The bars one refit is held to: `floor` (private accuracy below it has fallen; -inf
    without private rows), and what predicting the training rows' class frequencies scores on
    them (`constant` accuracy, `prior_loss` log-loss)."""

    floor: float
    constant: float
    prior_loss: float
    tolerance: float
    reference: str  # the accuracies the floor comes from, for the messages

    @classmethod
    def for_refit(
        cls,
        rows: TrainingRows,
        private_labels: np.ndarray | None,
        accuracy_before: float,
        tolerance: float,
    ) -> DivergenceRule:
        """The rule for a refit on `rows`; `accuracy_before`: the model in place's private
        accuracy (nan without one)."""
        floor, reference = -np.inf, ""
        if private_labels is not None and len(private_labels):
            majority = float(np.bincount(private_labels).max() / len(private_labels))
            best = max(majority, accuracy_before) if np.isfinite(accuracy_before) else majority
            floor = best - tolerance
            reference = f"previous model {accuracy_before:.3f}, majority class {majority:.3f}"
        prior = np.bincount(rows.y, weights=rows.w) / rows.w.sum()
        prior_loss = float(-(prior[prior > 0] * np.log(prior[prior > 0])).sum())
        return cls(floor, float(prior.max()), prior_loss, tolerance, reference)

    def fell(self, judged: Judged) -> bool:
        return bool(judged.private < self.floor)  # False without private data (nan)

    def diverged(self, judged: Judged) -> bool:
        unfit = judged.rows <= self.constant or judged.loss > self.prior_loss
        return not judged.finite or (self.fell(judged) and unfit)

    def describe(self) -> str:
        return (
            f"({self.reference}; allowed drop {self.tolerance}; predicting the class frequencies "
            f"scores {self.constant:.3f} on the training rows, log-loss {self.prior_loss:.3g})"
        )


def warn_rejected(name: str, tried: list[str], rule: DivergenceRule, had_model: bool) -> None:
    kept = (
        "the previous model stays"
        if had_model
        else "there is no previous model, so this client predicts the uniform "
        "distribution (every class alike) until a refit is accepted"
    )
    fix = (
        "the estimator's predict_proba returns NaN or inf: fix the estimator (check it "
        "with cosmosfl.testing.check_learner)"
        if all("non-finite" in t for t in tried)
        else "lower the estimator's learning rate, or raise divergence_tolerance"
    )
    warnings.warn(
        f"{name}: the refit diverged and was rejected; {kept}. "
        f"Accuracy at learning-rate {'; '.join(tried)} {rule.describe()}. To fix: {fix}",
        UserWarning,
        stacklevel=4,
    )


def warn_retried(
    name: str, tried: list[str], rule: DivergenceRule, scale: float, judged: Judged
) -> None:
    warnings.warn(
        f"{name}: the refit diverged (accuracy at learning-rate {'; '.join(tried)} "
        f"{rule.describe()}); retried with the learning rate scaled by {scale:g}, which fit "
        f"(private {judged.private:.3f}, training rows {judged.rows:.3f}); later refits keep it",
        UserWarning,
        stacklevel=4,
    )


def warn_fell(name: str, rule: DivergenceRule, judged: Judged) -> None:
    warnings.warn(
        f"{name}: private accuracy fell to {judged.private:.3f} {rule.describe()} while fitting "
        f"the distilled targets; the model fits its training rows ({judged.rows:.3f}, "
        f"log-loss {judged.loss:.3g}), so "
        "it is deployed: for this estimator the targets conflict with the private "
        "labels (lower public_weight to favour the private data)",
        UserWarning,
        stacklevel=4,
    )
