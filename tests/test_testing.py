"""cosmosfl.testing.check_learner: our learners pass it, and each broken learner fails the one
check that catches its fault, with a message that says how to fix it."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from cosmosfl import Learner, SklearnLearner, TorchLearner
from cosmosfl.learners import (
    LightGBMLearner,
    XGBoostLearner,
    validate_distill_inputs,
    validate_fit_inputs,
)
from cosmosfl.testing import CHECKS, LearnerCheckError, check_learner

ALL_CHECKS = [
    "fit_learns",
    "predict_proba",
    "seeded_determinism",
    "distill_moves_toward_targets",
    "distill_with_consistency",
    "soft_targets_matter",
    "distilled_knowledge_survives_fit",
    "state_round_trip",
    "column_order",
    "missing_class_columns",
    "distill_uses_weights",
    "state_after_distill",
    "bad_shapes_raise",
    "inputs_unchanged",
]


def test_the_checks_run_in_the_documented_order():
    assert list(CHECKS) == ALL_CHECKS


def make_torch(seed: int) -> TorchLearner:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return TorchLearner(net, seed=seed)


def test_torch_learner_passes_every_check():
    report = check_learner(make_torch)
    assert report.learner == "TorchLearner"
    assert report.passed == ALL_CHECKS and not report.skipped


def test_an_instance_is_copied_for_every_check():
    learner = make_torch(0)
    before = copy.deepcopy(learner.model.state_dict())
    report = check_learner(learner)
    assert report.passed == ALL_CHECKS
    after = learner.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # never trained itself


def test_torch_learner_with_a_cnn_on_user_data():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 10)
    x = (rng.normal(size=(4, 3, 8, 8))[y] + 0.2 * rng.normal(size=(40, 3, 8, 8))).astype(np.float32)

    def make(seed: int) -> TorchLearner:
        torch.manual_seed(seed)
        net = nn.Sequential(
            nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(288, 4)
        )
        return TorchLearner(net, seed=seed, distill_lr=1e-3, batch_size=8)

    assert check_learner(make, x, y).passed == ALL_CHECKS


def make_torch_vectors(seed: int, **options: Any) -> TorchLearner:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))
    return TorchLearner(net, seed=seed, **options)


def test_torch_learner_on_feature_vectors_passes_every_check():
    # TorchLearner's default neighbours for r_B must fit (N, D) vectors, not only images.
    report = check_learner(make_torch_vectors, input_shape=(20,))
    assert report.passed == ALL_CHECKS and not report.skipped


def test_image_only_neighbours_on_feature_vectors_fail_the_consistency_check():
    def image_only(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if x.ndim != 4:
            raise ValueError(f"x must be a (B, C, H, W) batch, got shape {tuple(x.shape)}")
        return x + 0.01 * torch.randn(x.shape, generator=generator)

    with pytest.raises(LearnerCheckError) as err:
        check_learner(lambda s: make_torch_vectors(s, augmentation=image_only), input_shape=(20,))
    assert set(err.value.failures) == {"distill_with_consistency"}
    message = err.value.failures["distill_with_consistency"]
    assert "lam=0" in message and "augmentation=" in message and "(B, C, H, W)" in message


@pytest.mark.parametrize(
    ("estimator", "num_classes"),
    [
        (LogisticRegression(max_iter=300), 10),
        (RandomForestClassifier(n_estimators=5, random_state=0), 10),
        (HistGradientBoostingClassifier(max_iter=10, random_state=0), 4),
        (make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)), 10),
    ],
    ids=["logistic", "forest", "hist_gradient_boosting", "pipeline"],
)
def test_sklearn_learner_passes_every_check(estimator, num_classes):
    report = check_learner(SklearnLearner(estimator, num_classes=num_classes), input_shape=(20,))
    assert report.learner == "SklearnLearner" and report.passed == ALL_CHECKS


def test_knn_is_reported_as_using_only_the_argmax():
    with pytest.warns(UserWarning, match="ignores sample weights"):
        report = check_learner(SklearnLearner(KNeighborsClassifier(3), num_classes=10))
    argmax_only = ("soft_targets_matter", "distill_uses_weights")
    assert report.passed == [c for c in ALL_CHECKS if c not in argmax_only]
    assert "KNeighborsClassifier ignores sample weights" in report.skipped["soft_targets_matter"]


@pytest.mark.parametrize(
    ("cls", "module"), [(XGBoostLearner, "xgboost"), (LightGBMLearner, "lightgbm")]
)
def test_boosting_learners_pass_every_check(cls, module):
    pytest.importorskip(module)
    report = check_learner(
        lambda seed: cls(num_classes=5, num_trees=10, seed=seed), input_shape=(20,)
    )
    assert report.passed == ALL_CHECKS and not report.skipped


def test_an_unseeded_random_forest_is_caught():
    learner = SklearnLearner(RandomForestClassifier(n_estimators=5), num_classes=10)
    with pytest.raises(LearnerCheckError) as err:
        check_learner(learner)
    assert "seeded_determinism" in err.value.failures
    assert "predict differently after the same fit" in err.value.failures["seeded_determinism"]


def test_global_random_state_is_restored():
    np.random.seed(7)
    torch.manual_seed(7)
    expected = np.random.rand(), torch.rand(1).item()
    np.random.seed(7)
    torch.manual_seed(7)
    check_learner(SklearnLearner(LogisticRegression(max_iter=300), num_classes=10))
    assert (np.random.rand(), torch.rand(1).item()) == expected


# -- a small correct custom learner, and broken variants of it -----------------------------------
class Softmax(Learner):
    """Multinomial logistic regression by full-batch gradient descent, seeded."""

    def __init__(self, num_classes: int = 10, seed: int = 0, lr: float = 0.5) -> None:
        self.num_classes, self.lr = num_classes, lr
        self.rng = np.random.default_rng(seed)
        self.w: np.ndarray | None = None

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(len(x), -1) @ self.w

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self._probs(x)

    def _probs(self, x: np.ndarray) -> np.ndarray:
        if self.w is None:
            self.w = 0.01 * self.rng.normal(size=(int(np.prod(x.shape[1:])), self.num_classes))
        z = self._logits(x)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)

    def _step(
        self, x: np.ndarray, targets: np.ndarray, epochs: int, weights: np.ndarray | None = None
    ) -> None:
        w = np.ones(len(x)) if weights is None else np.asarray(weights, np.float64)
        for _ in range(epochs * 5):
            residual = (self._probs(x) - targets) * w[:, None]
            grad = x.reshape(len(x), -1).T @ residual / w.sum()
            self.w = self.w - self.lr * grad

    def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
        validate_fit_inputs(x, y, self.num_classes)
        self._step(x, np.eye(self.num_classes)[y], epochs)
        return {"epochs": float(epochs)}

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
        self._step(x, targets, epochs, weights)
        return {}

    def get_state(self) -> Any:
        return {"w": None if self.w is None else self.w.copy(), "rng": self.rng.bit_generator.state}

    def set_state(self, state: Any) -> None:
        self.w = None if state["w"] is None else state["w"].copy()
        self.rng.bit_generator.state = state["rng"]


class Logits(Softmax):
    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return np.log(super().predict_proba(x) + 1e-3)


class GlobalRandom(Softmax):
    def __init__(self, num_classes: int = 10, seed: int = 0) -> None:
        super().__init__(num_classes, seed)
        self.rng = np.random.default_rng(np.random.randint(1 << 30))  # ignores its seed


class NoDistill(Softmax):
    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        return {}


class SharedState(Softmax):
    def _step(self, x: np.ndarray, targets: np.ndarray, epochs: int, weights=None) -> None:
        for _ in range(epochs * 5):
            grad = x.reshape(len(x), -1).T @ (self._probs(x) - targets) / len(x)
            self.w -= self.lr * grad  # in place: get_state's reference sees every update

    def get_state(self) -> Any:
        return {"w": self.w, "rng": self.rng.bit_generator.state}

    def set_state(self, state: Any) -> None:
        self.w = state["w"]
        self.rng.bit_generator.state = state["rng"]


class NoChecks(Softmax):
    def fit(self, x, y, *, epochs=1):
        self._step(x, np.eye(self.num_classes)[np.clip(y, 0, self.num_classes - 1)], epochs)
        return {}


class NoCheckpoints(Softmax):
    def get_state(self) -> Any:
        return Learner.get_state(self)


class Mutating(Softmax):
    def fit(self, x, y, *, epochs=1):
        out = super().fit(x, y, epochs=epochs)
        x *= 1.0001  # scales the caller's array in place
        return out


class ArgmaxOnly(Softmax):
    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        validate_distill_inputs(x, targets, weights, self.num_classes)
        hard = np.eye(self.num_classes)[np.asarray(targets).argmax(axis=1)]
        self._step(x, hard, epochs, weights)
        return {}


class Forgetful(Softmax):
    def fit(self, x, y, *, epochs=1):
        self.w = None  # every fit starts over: what distill taught is gone
        return super().fit(x, y, epochs=epochs)


class NoConsistency(Softmax):
    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        if lam > 0:
            raise ValueError("the neighbour augmentation needs (B, C, H, W) images")
        return super().distill(x, targets, weights, epochs=epochs, lam=lam)


class WrongWidth(Softmax):
    def predict_proba(self, x):
        return super().predict_proba(x)[:, :-1]


class SwappedColumns(Softmax):
    def predict_proba(self, x):
        return super().predict_proba(x)[:, [1, 0, *range(2, self.num_classes)]]


class Reversed(Softmax):
    def predict_proba(self, x):
        return np.ascontiguousarray(super().predict_proba(x)[:, ::-1])


class Packed(Softmax):
    """Trains on the classes it sees renumbered 0..k-1 and pads the missing ones at the end."""

    def fit(self, x, y, *, epochs=1):
        validate_fit_inputs(x, y, self.num_classes)
        seen = np.unique(y)
        self._step(x, np.eye(self.num_classes)[np.searchsorted(seen, y)], epochs)
        return {}


class WeightsDropped(Softmax):
    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        validate_distill_inputs(x, targets, weights, self.num_classes)
        self._step(x, targets, epochs)  # checked, then dropped
        return {}


class DistilledNotSaved(Softmax):
    """Keeps what it distilled and rehearses it in later fits, but get_state leaves it out."""

    memory: tuple[np.ndarray, np.ndarray] | None = None

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        self.memory = (x, targets)
        return super().distill(x, targets, weights, epochs=epochs, lam=lam)

    def fit(self, x, y, *, epochs=1):
        out = super().fit(x, y, epochs=epochs)
        if self.memory is not None:
            self._step(*self.memory, epochs)
        return out


def seeded(cls: type[Softmax]):
    return lambda seed: cls(seed=seed)


def test_a_correct_custom_learner_passes():
    assert check_learner(seeded(Softmax)).passed == ALL_CHECKS


@pytest.mark.parametrize(
    ("cls", "check", "advice"),
    [
        (Logits, "predict_proba", "NaN, inf or negative"),
        (WrongWidth, "predict_proba", "expected (60, num_classes=10)"),
        (GlobalRandom, "seeded_determinism", "generator the learner owns"),
        (NoDistill, "distill_moves_toward_targets", "did not move predictions toward"),
        (NoConsistency, "distill_with_consistency", "or run the federation with lam=0"),
        (ArgmaxOnly, "soft_targets_matter", "uses only the targets' argmax"),
        (Forgetful, "distilled_knowledge_survives_fit", "the next fit erases what distill"),
        (SharedState, "state_round_trip", "must return a copy"),
        (NoChecks, "bad_shapes_raise", "fit(x, y + num_classes) did not raise"),
        (Mutating, "inputs_unchanged", "x changed"),
        (SwappedColumns, "column_order", "class 0 in column 1, class 1 in column 0"),
        (Reversed, "fit_learns", "predict_proba returns the classes out of order"),
        (Packed, "missing_class_columns", "class 1 in column 0, class 2 in column 1"),
        (WeightsDropped, "distill_uses_weights", "distill ignores its weights"),
        (DistilledNotSaved, "state_after_distill", "get_state after distill leaves something"),
    ],
)
def test_each_fault_fails_its_check(cls, check, advice):
    with pytest.raises(LearnerCheckError) as err:
        check_learner(seeded(cls))
    assert check in err.value.failures, err.value
    assert advice in err.value.failures[check]
    assert f"- {check}: " in str(err.value) and isinstance(err.value, AssertionError)


def test_broken_learners_fail_only_their_check():
    for cls, check in (
        (ArgmaxOnly, "soft_targets_matter"),
        (Forgetful, "distilled_knowledge_survives_fit"),
        (NoConsistency, "distill_with_consistency"),
    ):
        with pytest.raises(LearnerCheckError) as err:
            check_learner(seeded(cls))
        assert set(err.value.failures) == {check}, err.value


def test_checks_that_need_a_failed_check_are_listed_as_not_run():
    with pytest.raises(LearnerCheckError) as err:
        check_learner(seeded(NoDistill))
    skipped = err.value.skipped
    assert set(skipped) == {
        "soft_targets_matter",
        "distilled_knowledge_survives_fit",
        "distill_uses_weights",
    }
    assert all("needs distill_moves_toward_targets" in why for why in skipped.values())
    assert "Not run" in str(err.value) and "- soft_targets_matter: not run" in str(err.value)
    with pytest.raises(LearnerCheckError) as err:
        check_learner(seeded(WrongWidth))
    assert set(err.value.failures) == {"predict_proba"}  # not a pile of follow-on failures
    assert set(err.value.skipped) == set(ALL_CHECKS) - {
        "fit_learns",
        "predict_proba",
        "bad_shapes_raise",
    }


def test_learner_without_checkpoints_is_reported_as_skipped():
    report = check_learner(seeded(NoCheckpoints))
    assert "state_round_trip" not in report.passed
    assert "cannot be checkpointed" in report.skipped["state_round_trip"]


def test_not_a_learner_and_bad_num_classes():
    with pytest.raises(LearnerCheckError, match="is not a cosmosfl"):
        check_learner(lambda seed: object())  # type: ignore[arg-type, return-value]
    with pytest.raises(LearnerCheckError, match="num_classes is 1"):
        check_learner(lambda seed: Softmax(num_classes=1))
    with pytest.raises(ValueError, match="give both x and y"):
        check_learner(seeded(Softmax), np.zeros((8, 64), np.float32))
