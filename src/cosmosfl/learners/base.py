"""The framework-agnostic client-model contract: fit / predict_proba / distill.

Anything that can be trained on labelled data and produce class probabilities can take part
in a federation through this contract — that is what model-agnostic means in cosmosfl.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from cosmosfl.core.constraints import Constraint, Rule
from cosmosfl.learners.parameters import checked_init, parameter_names, read_parameter


def accuracy_metrics(probs: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Top-1 accuracy, plus Top-5 when there are at least 20 classes (the paper's convention)."""
    y = np.asarray(y)
    if len(y) == 0:
        return {"top1": float("nan"), "n": 0.0}
    out = {"top1": float((probs.argmax(axis=1) == y).mean()), "n": float(len(y))}
    if probs.shape[1] >= 20:
        top5 = np.argpartition(-probs, 5, axis=1)[:, :5]
        out["top5"] = float((top5 == y[:, None]).any(axis=1).mean())
    return out


def validate_fit_inputs(x: np.ndarray, y: np.ndarray, num_classes: int) -> None:
    """Raise ValueError unless `x` and `y` have as many samples and every label lies in
    [0, num_classes): the checks a `fit` should make before training on anything."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} samples but y has {len(y)} labels")
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise ValueError(f"y must be 1-D class labels, got shape {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(
            f"labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]"
        )


def validate_distill_inputs(
    x: np.ndarray, targets: np.ndarray, weights: np.ndarray | None, num_classes: int
) -> None:
    """Raise ValueError unless `targets` is (len(x), num_classes) and `weights`, when given,
    is (len(x),): the checks a `distill` should make before training on anything."""
    shape = np.shape(targets)
    if shape != (len(x), num_classes):
        raise ValueError(
            f"targets must have shape (len(x), num_classes) = ({len(x)}, {num_classes}), "
            f"got {shape}"
        )
    if weights is not None and np.shape(weights) != (len(x),):
        raise ValueError(f"weights must have shape ({len(x)},), got {np.shape(weights)}")


@dataclass(frozen=True)
class Capabilities:
    """What a learner can do beyond the contract, declared on its class (as scikit-learn's
    `Tags`) so that engines, preflight and `check_learner` ask instead of probing attributes.

    - `torch_model`: it trains a torch `nn.Module` held in `.model` on `.device` (engines move
      it to a device; parameter counts and Flower's server evaluation read it);
    - `consistency`: it trains with the consistency term r_B, so before a run with λ > 0
      `check_neighbours(x)` can tell whether it can make the neighbours x' of such inputs;
    - `soft_targets`: `distill` learns the targets' whole distribution, not only their argmax
      (False with `soft_targets_reason` saying why: `check_learner` then skips the checks that
      need it, with that reason).
    """

    torch_model: bool = False
    consistency: bool = False
    soft_targets: bool = True
    soft_targets_reason: str = ""


class Learner(ABC):
    """A client (or server) model behind a three-method contract.

    Inputs are numpy arrays: images as float32 (N, C, H, W) (or any feature array the learner
    understands), labels as int64 (N,), soft targets as float32 (N, M) rows on the simplex.

    Parameters follow scikit-learn's discipline (learners/parameters.py): a learner stores its
    constructor arguments as given under their own names; `get_params`, `set_params` and
    `clone` are derived from the constructor's signature; `parameter_constraints` (and
    `parameter_rules`) are checked before the constructor runs. What a learner can do besides
    the contract is declared in `capabilities`.
    """

    num_classes: int
    parameter_constraints: ClassVar[dict[str, Constraint]] = {}
    parameter_rules: ClassVar[tuple[Rule, ...]] = ()
    capabilities: ClassVar[Capabilities] = Capabilities()
    # Parameters a clone shares with its original instead of copying (e.g. a site's privacy
    # accountant, which must see every fit of every copy).
    shared_parameters: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in vars(cls):
            cls.__init__ = checked_init(cls.__init__)  # type: ignore[method-assign]

    # -- parameters (scikit-learn's BaseEstimator) ---------------------------------------------
    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """The learner's parameters: its constructor's, in order."""
        return parameter_names(cls)

    def get_params(self) -> dict[str, Any]:
        """The constructor's arguments, as stored: `type(self)(**get_params())` builds an
        unfitted learner with the same settings."""
        return {name: read_parameter(self, name) for name in self.parameter_names()}

    def set_params(self, **params: Any) -> Self:
        """Change parameters as if the learner had been constructed with them: they are checked,
        and the learner is rebuilt (what it learned is dropped, except the weights of a model
        object given as a parameter). Returns the learner."""
        unknown = sorted(set(params) - set(self.parameter_names()))
        if unknown:
            raise ValueError(
                f"{type(self).__name__} has no parameter {', '.join(map(repr, unknown))}; its "
                f"parameters: {', '.join(self.parameter_names())}"
            )
        # Built first (its constructor checks the values): a refused change changes nothing.
        rebuilt = type(self)(**{**self.get_params(), **params})
        vars(self).clear()
        vars(self).update(vars(rebuilt))
        return self

    def clone(self, seed: int | None = None) -> Self:
        """A new, unfitted learner with this one's parameters (as scikit-learn's `clone`):
        each parameter deep-copied (a torch model with its current weights), a learner
        parameter cloned, `shared_parameters` shared. With `seed`, the clone's `seed` parameter
        (and its learner parameters') is `seed`: a random stream of its own."""
        params: dict[str, Any] = {}
        for name, value in self.get_params().items():
            if isinstance(value, Learner):
                params[name] = value.clone(seed)
            elif name in self.shared_parameters:
                params[name] = value
            else:
                params[name] = copy.deepcopy(value)
        if seed is not None and "seed" in params:
            params["seed"] = seed
        return type(self)(**params)

    def check_neighbours(self, x: np.ndarray) -> None:  # noqa: B027 (optional, no-op here)
        """Raise ValueError, saying what to change, when this learner cannot make r_B's
        neighbours x' of inputs like `x`; asked only of learners whose `capabilities` declare
        `consistency`."""

    @abstractmethod
    def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
        """Supervised training on labelled (private) data; returns training metrics."""

    @abstractmethod
    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, float32 (N, num_classes), rows summing to 1."""

    @abstractmethod
    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        """Fit the model's predictions on `x` to soft `targets` (+ λ·r_B where supported)."""

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """Accuracy on labelled data (never trains, never augments)."""
        return accuracy_metrics(self.predict_proba(x), y)

    def get_state(self) -> Any:
        """Everything needed to restore this learner (for checkpoints)."""
        raise NotImplementedError(f"{type(self).__name__} does not support checkpoints")

    def set_state(self, state: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support checkpoints")
