"""RefitLearner: the shared machinery of learners trained by (re)fitting whole models.

Estimators and gradient-boosted trees cannot take a gradient step toward soft targets the way a
network can, so they learn soft targets as *weighted copies* of the public rows, remember the
latest distilled targets so later fits keep them, and guard every refit against divergence.
SklearnLearner, XGBoostLearner and LightGBMLearner are built on it.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from typing import Any

import numpy as np

from cosmosfl.learners.base import Learner, validate_distill_inputs, validate_fit_inputs

# Default for `divergence_tolerance`: how far (in accuracy, absolute) a refit may fall below
# max(previous model, majority-class baseline) on the client's own labelled data before it is
# suspected of divergence. Distillation toward a cluster's classes legitimately costs a few
# points of private accuracy; a diverged fit loses tens (HistGradientBoosting: 0.88 -> 0.23,
# which also fit its own training rows no better than a constant).
DIVERGENCE_TOLERANCE = 0.2
# Copies of a public row whose weight is below this are dropped (they carry no information
# but cost training time): with M classes at most M * 1e-3 of a row's mass is lost.
MIN_TARGET_MASS = 1e-3


def soft_copies(
    x: np.ndarray, targets: np.ndarray, weights: np.ndarray, min_mass: float = MIN_TARGET_MASS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row i becomes one copy per class c with weight targets[i, c] * weights[i], copies
    under `min_mass` dropped: weighted log-loss on these copies is the soft-label cross-entropy.
    Rows come out in (row, class) order, so the result is deterministic."""
    mass = np.asarray(targets, np.float64) * np.asarray(weights, np.float64)[:, None]
    rows, cols = np.nonzero(mass >= min_mass)
    return x[rows], cols.astype(np.int64), mass[rows, cols]


def hard_copies(
    x: np.ndarray, targets: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One copy per row with the targets' argmax label (for estimators that ignore weights);
    rows with zero weight are left out, as the weighted path would."""
    keep = np.asarray(weights) > 0
    return x[keep], np.asarray(targets).argmax(axis=1)[keep].astype(np.int64), weights[keep]


class RefitLearner(Learner):
    """A learner whose every `fit`/`distill` trains on private data + the latest distilled targets.

    Subclasses implement `_train` (build a model from weighted rows, optionally continuing
    `init`), `_proba` (a model's (n, M) probabilities) and `_name`; this class does the rest:
    soft targets as weighted copies, remembering the distilled set, the divergence guard with
    learning-rate retries, metrics and checkpoint state.
    """

    # A subclass whose estimator ignores sample weights sets this False (see check_learner's
    # soft_targets_matter check, which then skips with `soft_targets_reason`).
    uses_soft_targets: bool = True
    soft_targets_reason: str = ""

    def __init__(
        self,
        *,
        num_classes: int,
        public_weight: float = 1.0,
        divergence_tolerance: float = DIVERGENCE_TOLERANCE,
        max_retries: int = 3,
        min_target_mass: float = MIN_TARGET_MASS,
    ) -> None:
        if int(num_classes) < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        if not public_weight >= 0:
            raise ValueError(f"public_weight must be >= 0, got {public_weight}")
        if not 0 <= divergence_tolerance <= 1:
            raise ValueError(
                f"divergence_tolerance must be in [0, 1] (accuracy), got {divergence_tolerance}"
            )
        if int(max_retries) < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.num_classes = int(num_classes)
        self.public_weight = float(public_weight)
        self.divergence_tolerance = float(divergence_tolerance)
        self.max_retries = int(max_retries)
        self.min_target_mass = float(min_target_mass)
        self._model: Any = None
        self._private: tuple[np.ndarray, np.ndarray] | None = None
        # The latest distilled public set (x_U, targets, weights): part of every later fit.
        self._public: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # Multiplies the learning rate; halved for good once a refit needed it.
        self._lr_scale = 1.0

    # -- subclass hooks -------------------------------------------------------------------------
    @abstractmethod
    def _train(
        self, x: np.ndarray, y: np.ndarray, w: np.ndarray, *, lr_scale: float, init: Any
    ) -> Any:
        """A new model trained on rows (x, y) with sample weights w (labels in [0, M)); `init` is
        the current model (None at first) for learners that continue from it. Must not modify
        `init`: a rejected refit keeps it."""

    @abstractmethod
    def _proba(self, model: Any, x: np.ndarray) -> np.ndarray:
        """(n, num_classes) probabilities of `model` on flat inputs x."""

    def _name(self) -> str:
        return type(self).__name__

    def _has_learning_rate(self) -> bool:
        """Whether `lr_scale` changes anything (else a diverged refit is not retried)."""
        return True

    def _expand(
        self, x: np.ndarray, targets: np.ndarray, weights: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return soft_copies(x, targets, weights, self.min_target_mass)

    # -- the contract ---------------------------------------------------------------------------
    @staticmethod
    def _flat(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return x.reshape(len(x), -1)

    def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
        """Train on the private data plus the remembered distilled targets (`epochs` is unused:
        a refit trains to convergence)."""
        validate_fit_inputs(x, y, self.num_classes)
        self._private = (self._flat(x).copy(), np.asarray(y, np.int64).copy())
        metrics, _ = self._refit(self._public)
        return metrics

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        n = len(x)
        if self._model is None:
            return np.full((n, self.num_classes), 1.0 / self.num_classes, dtype=np.float32)
        probs = np.asarray(self._proba(self._model, self._flat(x)), np.float64)
        probs = np.clip(probs, 0.0, None)
        probs /= probs.sum(axis=1, keepdims=True)
        return probs.astype(np.float32)

    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        """Refit on the private data plus x labelled by the soft `targets` (which replace the
        remembered ones). `lam` (the consistency term r_B) has no counterpart in a refit and is
        ignored; `epochs` is unused."""
        validate_distill_inputs(x, targets, weights, self.num_classes)
        xu = self._flat(x).copy()
        tu = np.asarray(targets, np.float64)
        tu = tu / np.clip(tu.sum(axis=1, keepdims=True), 1e-12, None)
        wu = np.ones(len(xu)) if weights is None else np.asarray(weights, np.float64).copy()
        public = (xu, tu, wu)
        metrics, accepted = self._refit(public)
        if accepted:
            self._public = public
        probs = self.predict_proba(xu)
        metrics["target_agreement"] = float((probs.argmax(axis=1) == tu.argmax(axis=1)).mean())
        logp = np.log(np.clip(probs.astype(np.float64), 1e-12, None))
        ent = np.where(tu > 0, tu * np.log(np.clip(tu, 1e-12, None)), 0.0)
        metrics["target_kl"] = float((ent - tu * logp).sum(axis=1).mean())
        return metrics

    # -- refit with the divergence guard ---------------------------------------------------------
    def _rows(
        self, public: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts = []
        if self._private is not None:
            xp, yp = self._private
            parts.append((xp, yp, np.ones(len(yp))))
        if public is not None:
            xu, tu, wu = public
            parts.append(self._expand(xu, tu, wu * self.public_weight))
        if not parts:
            raise ValueError("nothing to train on: call fit with labelled data first")
        xs, ys, ws = (np.concatenate(p) for p in zip(*parts, strict=True))
        if len(ys) == 0:
            raise ValueError("no training rows left: every public weight is 0 and no private data")
        return xs, ys, ws

    def _private_accuracy(self, model: Any) -> float:
        assert self._private is not None
        xp, yp = self._private
        probs = np.asarray(self._proba(model, xp), np.float64)
        if not np.isfinite(probs).all():
            return float("nan")
        return float((probs.argmax(axis=1) == yp).mean())

    def _judge(
        self, model: Any, x: np.ndarray, y: np.ndarray, w: np.ndarray
    ) -> tuple[bool, float, float, float]:
        """(finite probabilities, private accuracy, weighted accuracy and weighted log-loss on
        the training rows)."""
        probs = np.asarray(self._proba(model, x), np.float64)
        if not np.isfinite(probs).all():
            return False, float("nan"), float("nan"), float("inf")
        rows = float(w[probs.argmax(axis=1) == y].sum() / w.sum())
        picked = np.clip(probs[np.arange(len(y)), y], 1e-12, None)
        loss = float(-(w * np.log(picked)).sum() / w.sum())
        private = self._private_accuracy(model) if self._private is not None else float("nan")
        return bool(np.isfinite(private) or self._private is None), private, rows, loss

    def _refit(
        self, public: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    ) -> tuple[dict[str, float], bool]:
        """Train a new model and deploy it unless it diverged: non-finite probabilities, or
        private accuracy more than `divergence_tolerance` below max(previous model, majority
        class) while the model also fails its own training rows (weighted accuracy no better
        than predicting their most common class, or weighted log-loss worse than predicting
        their class frequencies). Returns the metrics and whether the model was deployed."""
        x, y, w = self._rows(public)
        previous = self._model
        floor, ref = -np.inf, ""
        if self._private is not None and len(self._private[1]):
            majority = float(np.bincount(self._private[1]).max() / len(self._private[1]))
            before = self._private_accuracy(previous) if previous is not None else float("nan")
            floor = (max(majority, before) if np.isfinite(before) else majority) - (
                self.divergence_tolerance
            )
            ref = f"previous model {before:.3f}, majority class {majority:.3f}"
        prior = np.bincount(y, weights=w) / w.sum()
        constant = float(prior.max())
        prior_loss = float(-(prior[prior > 0] * np.log(prior[prior > 0])).sum())
        retries, tried, scale = 0, [], self._lr_scale
        while True:
            model = self._train(x, y, w, lr_scale=scale, init=previous)
            finite, acc, rows_acc, loss = self._judge(model, x, y, w)
            fell = bool(acc < floor)  # False when there is no private data (acc is nan)
            unfit = rows_acc <= constant or loss > prior_loss
            if finite and not (fell and unfit):
                break
            tried.append(
                f"scale {scale:g}: private {acc:.3f}, training rows {rows_acc:.3f} "
                f"(log-loss {loss:.3g})"
                if finite
                else f"scale {scale:g}: non-finite probabilities"
            )
            if retries >= self.max_retries or not self._has_learning_rate():
                model = None
                break
            retries += 1
            scale /= 2
        name, tol = self._name(), self.divergence_tolerance
        rule = (
            f"({ref}; allowed drop {tol}; predicting the class frequencies scores "
            f"{constant:.3f} on the training rows, log-loss {prior_loss:.3g})"
        )
        if model is None:
            kept = (
                "the previous model stays"
                if previous is not None
                else "there is no previous model, so this client predicts the uniform "
                "distribution (every class alike) until a refit is accepted"
            )
            broken = all("non-finite" in t for t in tried)
            fix = (
                "the estimator's predict_proba returns NaN or inf: fix the estimator (check it "
                "with cosmosfl.testing.check_learner)"
                if broken
                else "lower the estimator's learning rate, or raise divergence_tolerance"
            )
            warnings.warn(
                f"{name}: the refit diverged and was rejected; {kept}. "
                f"Accuracy at learning-rate {'; '.join(tried)} {rule}. To fix: {fix}",
                UserWarning,
                stacklevel=3,
            )
        else:
            if retries:
                warnings.warn(
                    f"{name}: the refit diverged (accuracy at learning-rate {'; '.join(tried)} "
                    f"{rule}); retried with the learning rate scaled by {scale:g}, which fit "
                    f"(private {acc:.3f}, training rows {rows_acc:.3f}); later refits keep it",
                    UserWarning,
                    stacklevel=3,
                )
            elif fell:
                warnings.warn(
                    f"{name}: private accuracy fell to {acc:.3f} {rule} while fitting the "
                    f"distilled targets; the model fits its training rows ({rows_acc:.3f}, "
                    f"log-loss {loss:.3g}), so "
                    "it is deployed: for this estimator the targets conflict with the private "
                    "labels (lower public_weight to favour the private data)",
                    UserWarning,
                    stacklevel=3,
                )
            self._model, self._lr_scale = model, scale
        metrics = {
            "rows": float(len(y)),
            "private_rows": float(0 if self._private is None else len(self._private[1])),
            "public_rows": float(0 if public is None else len(public[0])),
            "refit_rejected": float(model is None),
            "refit_retries": float(retries),
            "private_top1_fell": float(model is not None and fell),
            "lr_scale": float(self._lr_scale),
        }
        if self._private is not None and self._model is not None:
            metrics["train_top1"] = self._private_accuracy(self._model)
        return metrics, model is not None

    # -- checkpoints -----------------------------------------------------------------------------
    def _model_state(self, model: Any) -> Any:
        """A picklable copy of `model` (override for models that do not pickle well)."""
        import copy

        return copy.deepcopy(model)

    def _load_model(self, state: Any) -> Any:
        import copy

        return copy.deepcopy(state)

    def get_state(self) -> dict[str, Any]:
        """The model, the private data and the remembered distilled targets, so a resumed run
        continues exactly as an uninterrupted one."""
        return {
            "model": None if self._model is None else self._model_state(self._model),
            "private": _copied(self._private),
            "public": _copied(self._public),
            "lr_scale": self._lr_scale,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._model = None if state["model"] is None else self._load_model(state["model"])
        self._private = _copied(state["private"])  # type: ignore[assignment]
        self._public = _copied(state["public"])  # type: ignore[assignment]
        self._lr_scale = float(state.get("lr_scale", 1.0))


def _copied(arrays: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, ...] | None:
    return None if arrays is None else tuple(np.array(a, copy=True) for a in arrays)
