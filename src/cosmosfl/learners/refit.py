"""RefitLearner: the shared machinery of learners trained by (re)fitting whole models.

Estimators and gradient-boosted trees cannot take a gradient step toward soft targets the way a
network can, so they refit on the private rows plus the public rows' soft targets (scikit-learn
estimators as *weighted copies* of the public rows, the boosters through a soft-label
objective), remember the latest distilled targets so later fits keep them, and guard every
refit against divergence. SklearnLearner, XGBoostLearner and LightGBMLearner are built on it.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from cosmosfl.core.constraints import Constraint, Interval
from cosmosfl.learners.base import Learner, validate_distill_inputs, validate_fit_inputs
from cosmosfl.learners.divergence import (
    DIVERGENCE_TOLERANCE,
    DivergenceRule,
    Judged,
    judge,
    warn_fell,
    warn_rejected,
    warn_retried,
)
from cosmosfl.learners.training_rows import (
    MIN_TARGET_MASS,
    TrainingRows,
    fingerprint,
    hard_copies,
    hard_copy_index,
    soft_copies,
    soft_copy_index,
    training_rows,
)

__all__ = [
    "DIVERGENCE_TOLERANCE",
    "MIN_TARGET_MASS",
    "RefitLearner",
    "hard_copies",
    "hard_copy_index",
    "soft_copies",
    "soft_copy_index",
]


class RefitLearner(Learner):
    """A learner whose every `fit`/`distill` trains on private data + the latest distilled targets.

    Subclasses implement `_train` (build a model from weighted rows, optionally continuing
    `init`), `_proba` (a model's (n, M) probabilities) and `_name`; this class does the rest:
    soft targets as weighted copies (or, for a subclass that overrides `_train_rows`, as soft
    targets on the unique rows), remembering the distilled set, the divergence guard with
    learning-rate retries, metrics and checkpoint state.

    Each check of a model predicts every unique row once (copies read their row's
    probabilities), and `distill`'s `target_agreement` / `target_kl` reuse the accepted model's
    probabilities on the public rows. A refit whose inputs equal those of the model in place
    (same private rows, same remembered targets, same settings, learning-rate scale and seed:
    the local step of round t after the distillation of round t - 1) reuses that model and its
    checks instead of training it again, when the learner's training is deterministic
    (`_deterministic`); the records are those of a recomputed fit.
    """

    parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "num_classes": Interval(int, 2),
        "public_weight": Interval(float, 0),
        "divergence_tolerance": Interval(float, 0, 1, note="accuracy"),
        "max_retries": Interval(int, 0),
        "min_target_mass": Interval(float, 0, 1, closed="left"),
    }

    def __init__(
        self,
        *,
        num_classes: int,
        public_weight: float = 1.0,
        divergence_tolerance: float = DIVERGENCE_TOLERANCE,
        max_retries: int = 3,
        min_target_mass: float = MIN_TARGET_MASS,
    ) -> None:
        self.num_classes = num_classes
        self.public_weight = public_weight
        self.divergence_tolerance = divergence_tolerance
        self.max_retries = max_retries
        self.min_target_mass = min_target_mass
        self._model: Any = None
        self._private: tuple[np.ndarray, np.ndarray] | None = None
        # The latest distilled public set (x_U, targets, weights): part of every later fit.
        self._public: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # Multiplies the learning rate; halved for good once a refit needed it.
        self._lr_scale = 1.0
        self._forget_fit()

    def _forget_fit(self) -> None:
        """Drop what is known of the model in place (a new model, a restored state)."""
        # Digest of the inputs the model in place was trained on (None: unknown, or training
        # not deterministic) and what the guard measured of it then.
        self._fit_key: str | None = None
        self._fit_judged: Judged | None = None
        # Digest of the private rows `_fit_judged.private` was measured on.
        self._judged_private: str | None = None

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

    def _train_rows(self, rows: TrainingRows, *, lr_scale: float, init: Any) -> Any:
        """A new model trained on `rows`: by default `_train` on the weighted copies. A learner
        that takes soft targets directly overrides this to train on the unique rows."""
        return self._train(rows.copies_x(), rows.y, rows.w, lr_scale=lr_scale, init=init)

    def _name(self) -> str:
        return type(self).__name__

    def _has_learning_rate(self) -> bool:
        """Whether `lr_scale` changes anything (else a diverged refit is not retried)."""
        return True

    def _copy_index(
        self, targets: np.ndarray, weights: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, label, weight) of the copies the public rows become."""
        return soft_copy_index(targets, weights, self.min_target_mass)

    def _trained_rows(self, rows: TrainingRows) -> int:
        """How many rows a refit trains on (the metric `rows`): the copies by default."""
        return len(rows.y)

    def _deterministic(self) -> bool:
        """Whether `_train_rows` gives the same model for the same rows, settings and
        learning-rate scale whatever the model in place (then an unchanged refit is reused)."""
        return False

    def _settings(self) -> Any:
        """Everything besides the rows that decides what `_train_rows` builds (part of the
        digest that decides whether a refit is unchanged)."""
        return ()

    def refit_work(self, private_rows: int, public_rows: int, features: int) -> float:
        """Rough input values one round of this learner processes: one refit on the private
        rows and up to M copies of each public row (the round's second refit is usually a
        reused one): what the simulation engine's `workers: auto` rule weighs."""
        return float((private_rows + public_rows * self.num_classes) * features)

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
        return self._normalised(self._proba(self._model, self._flat(x)))

    @staticmethod
    def _normalised(probs: np.ndarray) -> np.ndarray:
        probs = np.clip(np.asarray(probs, np.float64), 0.0, None)
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
        judged = self._fit_judged
        if accepted:
            self._public = public
        if accepted and judged is not None and judged.probs is not None:
            # The guard predicted these rows with the deployed model: no second prediction.
            probs = self._normalised(judged.probs[len(judged.probs) - len(xu) :])
        else:
            probs = self.predict_proba(xu)
        metrics["target_agreement"] = float((probs.argmax(axis=1) == tu.argmax(axis=1)).mean())
        logp = np.log(np.clip(probs.astype(np.float64), 1e-12, None))
        ent = np.where(tu > 0, tu * np.log(np.clip(tu, 1e-12, None)), 0.0)
        metrics["target_kl"] = float((ent - tu * logp).sum(axis=1).mean())
        return metrics

    # -- refit with the divergence guard ---------------------------------------------------------
    def _rows(self, public: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> TrainingRows:
        return training_rows(
            self._private, public, self.public_weight, self.num_classes, self._copy_index
        )

    def _private_key(self) -> str | None:
        return None if self._private is None else fingerprint(*self._private)

    def _private_accuracy(self, model: Any) -> float:
        assert self._private is not None
        xp, yp = self._private
        probs = np.asarray(self._proba(model, xp), np.float64)
        if not np.isfinite(probs).all():
            return float("nan")
        return float((probs.argmax(axis=1) == yp).mean())

    def _accuracy_in_place(self) -> float:
        """Private accuracy of the model in place (from its checks when the private rows are
        those it was checked on)."""
        judged = self._fit_judged
        if judged is not None and self._judged_private == self._private_key():
            return judged.private
        return self._private_accuracy(self._model)

    def _judge(self, model: Any, rows: TrainingRows) -> Judged:
        """The guard's measures of `model` on `rows`, from one prediction of each unique row."""
        return judge(self._proba(model, rows.x), rows, self._private is not None)

    def _refit(
        self, public: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    ) -> tuple[dict[str, float], bool]:
        """Train a new model and deploy it unless it diverged: non-finite probabilities, or
        private accuracy more than `divergence_tolerance` below max(previous model, majority
        class) while the model also fails its own training rows (weighted accuracy no better
        than predicting their most common class, or weighted log-loss worse than predicting
        their class frequencies). Returns the metrics and whether the model was deployed."""
        rows = self._rows(public)
        previous = self._model
        private_key = self._private_key()
        labels = None if self._private is None else self._private[1]
        before = (
            self._accuracy_in_place()
            if previous is not None and labels is not None and len(labels)
            else float("nan")
        )
        rule = DivergenceRule.for_refit(rows, labels, before, self.divergence_tolerance)
        retries, tried, scale = 0, [], self._lr_scale
        while True:
            key = self._input_key(private_key, public, scale)
            if key is not None and key == self._fit_key and self._fit_judged is not None:
                # The model in place was trained on exactly these inputs: training it again
                # would rebuild it, and its checks would measure what they measured then.
                model, judged = previous, self._fit_judged
            else:
                model = self._train_rows(rows, lr_scale=scale, init=previous)
                judged = self._judge(model, rows)
            if not rule.diverged(judged):
                break
            tried.append(judged.attempt(scale))
            if retries >= self.max_retries or not self._has_learning_rate():
                model = None
                break
            retries += 1
            scale /= 2
        fell = model is not None and rule.fell(judged)
        if model is None:
            warn_rejected(self._name(), tried, rule, previous is not None)
        else:
            if retries:
                warn_retried(self._name(), tried, rule, scale, judged)
            elif fell:
                warn_fell(self._name(), rule, judged)
            self._model, self._lr_scale = model, scale
            self._fit_key, self._fit_judged, self._judged_private = key, judged, private_key
        metrics = {
            "rows": float(self._trained_rows(rows)),
            "private_rows": float(0 if self._private is None else len(self._private[1])),
            "public_rows": float(0 if public is None else len(public[0])),
            "refit_rejected": float(model is None),
            "refit_retries": float(retries),
            "private_top1_fell": float(fell),
            "lr_scale": float(self._lr_scale),
        }
        if self._private is not None and self._model is not None:
            metrics["train_top1"] = self._accuracy_in_place()
        return metrics, model is not None

    def _input_key(
        self,
        private_key: str | None,
        public: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        scale: float,
    ) -> str | None:
        """Digest of everything a refit at learning-rate scale `scale` trains on, or None when
        the learner's training is not deterministic (then nothing is reused)."""
        if not self._deterministic():
            return None
        return fingerprint(
            type(self).__qualname__,
            private_key,
            public,
            self.public_weight,
            self.min_target_mass,
            float(scale),
            self._settings(),
        )

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
        self._forget_fit()  # a restored model is trained again once before anything is reused


def _copied(arrays: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, ...] | None:
    return None if arrays is None else tuple(np.array(a, copy=True) for a in arrays)
