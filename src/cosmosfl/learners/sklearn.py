"""SklearnLearner: any scikit-learn classifier with `predict_proba`, behind the Learner contract."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import numpy as np

from cosmosfl.learners.base import Learner, validate_distill_inputs, validate_fit_inputs


class SklearnLearner(Learner):
    """Wraps a scikit-learn estimator so it can sit in a federation beside torch clients.

    Most estimators cannot be updated incrementally, so distillation refits on the client's own
    labelled data together with the public set labelled by the targets' argmax (the target's
    confidence times the optional weights as sample weights, where the estimator accepts
    sample weights). Inputs are flattened to (N, features).
    """

    def __init__(self, estimator: Any, *, num_classes: int, public_weight: float = 1.0) -> None:
        if not hasattr(estimator, "predict_proba"):
            raise TypeError(
                f"{type(estimator).__name__} has no predict_proba; use a probabilistic classifier "
                "(e.g. LogisticRegression, RandomForestClassifier, SVC(probability=True))"
            )
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.template = estimator
        self.estimator: Any = None
        self.num_classes = int(num_classes)
        self.public_weight = float(public_weight)
        self._private: tuple[np.ndarray, np.ndarray] | None = None

    @staticmethod
    def _flat(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return x.reshape(len(x), -1)

    def _supports_weights(self) -> bool:
        try:
            return "sample_weight" in inspect.signature(self.template.fit).parameters
        except (TypeError, ValueError):
            return False

    def _refit(self, x: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> None:
        from sklearn.base import clone  # imported on use: scikit-learn takes ~2 s to import

        est = clone(self.template)
        if w is not None and self._supports_weights():
            est.fit(x, y, sample_weight=w)
        else:
            est.fit(x, y)
        self.estimator = est

    def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
        validate_fit_inputs(x, y, self.num_classes)
        xf, y = self._flat(x), np.asarray(y)
        self._private = (xf, y)
        self._refit(xf, y, None)
        return {"train_top1": float((self.estimator.predict(xf) == y).mean())}

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        n = len(x)
        if self.estimator is None:
            return np.full((n, self.num_classes), 1.0 / self.num_classes, dtype=np.float32)
        raw = self.estimator.predict_proba(self._flat(x))
        # The estimator knows only the classes it has seen; place them in the full M columns.
        out = np.zeros((n, self.num_classes), dtype=np.float64)
        out[:, np.asarray(self.estimator.classes_, dtype=np.int64)] = raw
        out /= out.sum(axis=1, keepdims=True)
        return out.astype(np.float32)

    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        validate_distill_inputs(x, targets, weights, self.num_classes)
        xu, targets = self._flat(x), np.asarray(targets)
        yu = targets.argmax(axis=1)
        wu = targets.max(axis=1) * self.public_weight
        if weights is not None:
            wu = wu * np.asarray(weights)
        if self._private is not None:
            xp, yp = self._private
            xs, ys = np.concatenate([xp, xu]), np.concatenate([yp, yu])
            ws = np.concatenate([np.ones(len(yp)), wu])
        else:
            xs, ys, ws = xu, yu, wu
        self._refit(xs, ys, ws)
        agree = float((self.predict_proba(xu).argmax(axis=1) == yu).mean())
        return {"target_agreement": agree}

    def get_state(self) -> dict[str, Any]:
        return {"estimator": copy.deepcopy(self.estimator), "private": self._private}

    def set_state(self, state: dict[str, Any]) -> None:
        self.estimator = state["estimator"]
        self._private = state["private"]
