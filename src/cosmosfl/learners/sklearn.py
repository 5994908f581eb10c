"""SklearnLearner: any scikit-learn classifier with `predict_proba`, behind the Learner contract."""

from __future__ import annotations

import inspect
import warnings
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

import numpy as np

from cosmosfl.core.constraints import Constraint, Custom, Interval, Options
from cosmosfl.learners.base import Capabilities
from cosmosfl.learners.refit import (
    DIVERGENCE_TOLERANCE,
    MIN_TARGET_MASS,
    RefitLearner,
    hard_copy_index,
    soft_copy_index,
)
from cosmosfl.learners.soft_trees import fit_soft_trees, twin_reason
from cosmosfl.learners.training_rows import TrainingRows

LEARNING_RATE_PARAMS = ("learning_rate", "learning_rate_init", "eta")
# How soft targets reach the estimator: "twin" (a tree classifier's trees grown as regressors
# on the unique rows, learners/soft_trees.py), "copies" (weighted copies), "auto" (twin where
# the estimator has one, else copies).
SOFT_TARGETS = ("auto", "twin", "copies")


class _Constant:
    """The model of a client whose training rows all have one class (most estimators refuse
    to fit a single class)."""

    def __init__(self, n_classes: int = 1) -> None:
        self.n = n_classes

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return np.ones((len(x), self.n))


class SklearnLearner(RefitLearner):
    """Wraps a scikit-learn classifier so it can sit in a federation beside torch clients.

    Soft targets: `distill` turns each public row into one weighted copy per class, with weight
    target[c] × weight × `public_weight` (copies under `min_target_mass` dropped). For
    estimators that minimise weighted log-loss (LogisticRegression, gradient boosting,
    MLPClassifier) this *is* soft-label cross-entropy; for trees and forests the leaves' class
    frequencies become the soft mass. A DecisionTreeClassifier, RandomForestClassifier or
    ExtraTreesClassifier with the Gini criterion (and no class_weight, oob_score or
    warm_start) instead grows regressor trees on the unique rows with their class mass as
    outputs (`soft_targets="auto"`, the default, or "twin"): the same split statistics, leaf
    values, seeds and bootstraps without the copies (learners/soft_trees.py says why);
    `soft_targets="copies"` keeps the copies for every estimator. Weights reach the
    estimator's `fit(sample_weight=)`, or a `Pipeline`'s final step (`<step>__sample_weight`).
    An estimator that ignores weights (e.g. KNeighborsClassifier) gets one copy per row
    labelled with the argmax, and a single UserWarning says so: its soft targets and
    confidence weights reduce to argmax labels.

    Knowledge is kept by refitting on the union: every `fit` trains on the private data plus
    the latest distilled targets, and every `distill` on the private data plus the new targets
    (which replace the old). A refit from scratch on that union is the default for every
    estimator (warm_start/partial_fit are not used: they would make the model depend on the
    order of calls in estimator-specific ways); `get_state` holds the remembered targets.

    Labels are re-encoded to 0..k-1 over the classes present, so estimators that need
    contiguous labels (XGBClassifier) work on a client missing classes; absent classes get
    probability 0. After every refit the new model is checked on the client's labelled private
    data: it diverged if its probabilities are not finite, or if its private accuracy falls more
    than `divergence_tolerance` (0.2) below max(previous model, majority class) *and* it fails
    its own training rows too (weighted accuracy no better than their most common class, or
    weighted log-loss worse than predicting their class frequencies: HistGradientBoosting's
    diverged refit, 0.88 -> 0.23, scored ±1e5, far above that log-loss). A diverged refit is retried
    with the estimator's learning rate halved (`learning_rate`, `learning_rate_init` or `eta`,
    also inside a Pipeline; up to `max_retries` times; later refits keep the smaller rate), else
    rejected and the previous model stays; a UserWarning names the estimator and accuracies, and
    the metrics `refit_retries` and `refit_rejected` report it. A refit whose private accuracy
    falls that far but that fits its training rows is deployed with a UserWarning (metric
    `private_top1_fell`): the targets conflict with the private labels for this estimator.
    Inputs are flattened to (N, features). Training and prediction run with `threads`
    OpenMP/BLAS threads (1 by default: clients run side by side, and idle BLAS threads spinning
    next to OpenMP ones made a HistGradientBoosting refit ~20× slower).
    """

    parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "estimator": Custom(
            lambda e: hasattr(e, "predict_proba"),
            "use a probabilistic classifier, one with predict_proba (e.g. LogisticRegression, "
            "RandomForestClassifier, SVC(probability=True))",
        ),
        "threads": Interval(int, 1, none="libraries' default"),
        "soft_targets": Options(SOFT_TARGETS),
    }

    def __init__(
        self,
        estimator: Any,
        *,
        num_classes: int,
        public_weight: float = 1.0,
        divergence_tolerance: float = DIVERGENCE_TOLERANCE,
        max_retries: int = 3,
        min_target_mass: float = MIN_TARGET_MASS,
        threads: int | None = 1,
        soft_targets: str = "auto",
    ) -> None:
        super().__init__(
            num_classes=num_classes,
            public_weight=public_weight,
            divergence_tolerance=divergence_tolerance,
            max_retries=max_retries,
            min_target_mass=min_target_mass,
        )
        self.estimator = estimator  # the template every refit clones
        self.threads = threads
        self.soft_targets = soft_targets
        reason = twin_reason(estimator)
        if soft_targets == "twin" and reason is not None:
            raise ValueError(f"soft_targets='twin': {reason}; use 'auto' or 'copies'")
        # Whether soft targets train the estimator's regressor twin on the unique rows.
        self._twin = soft_targets != "copies" and reason is None
        self._weight_key = _sample_weight_key(estimator)
        self._lr_param = _learning_rate_param(estimator)
        self._warned_weights = False
        if self._weight_key is None:
            self.capabilities = Capabilities(
                soft_targets=False,
                soft_targets_reason=(
                    f"{_describe(estimator)} ignores sample weights: soft targets and confidence "
                    "weights are reduced to argmax labels"
                ),
            )

    @property
    def estimator_(self) -> Any:
        """The fitted scikit-learn estimator (trained on labels re-encoded to 0..k-1; see
        `classes_`), or None before the first fit; `estimator` is the unfitted template."""
        return None if self._model is None else self._model[0]

    @property
    def classes_(self) -> np.ndarray | None:
        """The original labels of the estimator's classes 0..k-1."""
        return None if self._model is None else self._model[1]

    def _name(self) -> str:
        return f"SklearnLearner({_describe(self.estimator)})"

    def _has_learning_rate(self) -> bool:
        return self._lr_param is not None

    def _copy_index(
        self, targets: np.ndarray, weights: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._weight_key is not None:
            return soft_copy_index(targets, weights, self.min_target_mass)
        if not self._warned_weights:
            self._warned_weights = True
            warnings.warn(
                f"{self.capabilities.soft_targets_reason}; use an estimator whose fit takes "
                "sample_weight to learn the soft targets",
                UserWarning,
                stacklevel=5,
            )
        return hard_copy_index(targets, weights)

    def _deterministic(self) -> bool:
        # A refit is a fresh clone of the template: the same rows give the same model when
        # every random_state in it (also inside a Pipeline) is a fixed integer.
        return _seeded(self.estimator)

    def _settings(self) -> Any:
        return (
            _describe(self.estimator),
            repr(self.estimator.get_params(deep=True)),
            self.threads,
            self._twin,
        )

    def _soft(self, rows: TrainingRows) -> bool:
        # Private rows alone are hard labels, one copy each: the estimator itself trains on
        # them (so `local` and a first fit are what the user's classifier gives).
        return self._twin and len(rows.x) > rows.private_rows

    def _train_rows(self, rows: TrainingRows, *, lr_scale: float, init: Any) -> Any:
        if not self._soft(rows):
            return super()._train_rows(rows, lr_scale=lr_scale, init=init)
        with self._limited():
            model = fit_soft_trees(self.estimator, rows, self.num_classes)
        return model, model.classes_

    def _trained_rows(self, rows: TrainingRows) -> int:
        return len(rows.x) if self._soft(rows) else len(rows.y)

    def _train(
        self, x: np.ndarray, y: np.ndarray, w: np.ndarray, *, lr_scale: float, init: Any
    ) -> Any:
        from sklearn.base import clone  # imported on use: scikit-learn takes ~2 s to import

        classes = np.unique(y)
        if len(classes) == 1:
            return _Constant(), classes
        est = clone(self.estimator)
        if lr_scale != 1.0 and self._lr_param is not None:
            name, value = self._lr_param
            est.set_params(**{name: value * lr_scale})
        encoded = np.searchsorted(classes, y)
        kwargs = {} if self._weight_key is None else {self._weight_key: w}
        with self._limited():
            est.fit(x, encoded, **kwargs)
        return est, classes

    def _proba(self, model: Any, x: np.ndarray) -> np.ndarray:
        est, classes = model
        with self._limited():
            raw = np.asarray(est.predict_proba(x), np.float64)
        # The estimator knows only the classes it was trained on; place them in all M columns.
        seen = classes if isinstance(est, _Constant) else classes[np.asarray(est.classes_, int)]
        out = np.zeros((len(x), self.num_classes), dtype=np.float64)
        out[:, seen] = raw
        return out

    def _limited(self) -> AbstractContextManager[Any]:
        if self.threads is None:
            return nullcontext()
        from threadpoolctl import threadpool_limits  # a scikit-learn dependency

        return threadpool_limits(limits=self.threads)

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["warned_weights"] = self._warned_weights
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        if "estimator" in state:  # a checkpoint from before soft targets: labels not encoded
            est = state["estimator"]
            model = None if est is None else (est, np.arange(self.num_classes))
            state = {"model": model, "private": state.get("private"), "public": None}
        super().set_state(state)
        self._warned_weights = bool(state.get("warned_weights", self._warned_weights))


def _describe(estimator: Any) -> str:
    steps = getattr(estimator, "steps", None)
    if steps:
        return "Pipeline(" + ", ".join(type(s).__name__ for _, s in steps) + ")"
    return type(estimator).__name__


def _seeded(estimator: Any) -> bool:
    """Whether every `random_state` of the estimator (nested ones too) is a fixed integer."""
    try:
        params = estimator.get_params(deep=True)
    except Exception:
        return False
    return all(
        isinstance(v, int | np.integer) and not isinstance(v, bool)
        for k, v in params.items()
        if k.split("__")[-1] == "random_state"
    )


def _fit_takes(estimator: Any, name: str) -> bool:
    try:
        params = inspect.signature(estimator.fit).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    return name in params


def _sample_weight_key(estimator: Any) -> str | None:
    """The keyword under which `fit` passes sample weights to the estimator that uses them
    (`sample_weight`, or `<step>__<step>__sample_weight` through nested Pipelines), or None."""
    prefix = ""
    while hasattr(estimator, "steps") and estimator.steps:
        name, last = estimator.steps[-1]
        if last is None or last == "passthrough":
            return None
        prefix, estimator = f"{prefix}{name}__", last
    return f"{prefix}sample_weight" if _fit_takes(estimator, "sample_weight") else None


def _learning_rate_param(estimator: Any) -> tuple[str, float] | None:
    """(parameter name for set_params, value) of the estimator's numeric learning rate, looking
    through a Pipeline into its final step; None when it has none."""
    try:
        params = estimator.get_params(deep=True)
    except Exception:
        return None
    prefix = ""
    probe = estimator
    while hasattr(probe, "steps") and probe.steps:
        name, probe = probe.steps[-1]
        prefix += f"{name}__"
    for key in LEARNING_RATE_PARAMS:
        value = params.get(prefix + key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return prefix + key, float(value)
    return None
