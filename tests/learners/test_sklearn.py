"""SklearnLearner: soft targets as weighted copies, distilled knowledge kept across fits, weights
through Pipelines, argmax fallback (warned) for estimators without weights, label re-encoding,
and the divergence guard."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from cosmosfl.learners import SklearnLearner


def data(classes=(0, 1), n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.choice(classes, n)
    x = rng.normal(size=(n, 1, 2, 2)).astype(np.float32)
    x[:, 0, 0, 0] += 4 * y
    return x, y.astype(np.int64)


def public(n=40, seed=1):
    """Public inputs away from the private ones, where only the targets decide predictions."""
    x = np.random.default_rng(seed).normal(size=(n, 1, 2, 2)).astype(np.float32)
    x[:, 0, 0, 1] += 6
    return x


def soft(n, m, first, second, mass):
    t = np.full((n, m), 0.0, np.float32)
    t[:, first], t[:, second] = 1 - mass, mass
    return t


# -- what already held ---------------------------------------------------------------------------
def test_predict_proba_has_all_classes_even_if_unseen():
    x, y = data(classes=(1, 3))
    learner = SklearnLearner(LogisticRegression(), num_classes=5)
    learner.fit(x, y)
    p = learner.predict_proba(x)
    assert p.shape == (60, 5)
    assert np.allclose(p.sum(1), 1)
    assert np.allclose(p[:, [0, 2, 4]], 0)
    assert learner.evaluate(x, y)["top1"] > 0.9


def test_untrained_learner_predicts_uniform():
    p = SklearnLearner(LogisticRegression(), num_classes=4).predict_proba(np.zeros((3, 2)))
    assert np.allclose(p, 0.25)


def test_distill_learns_public_targets_and_keeps_private_data():
    x, y = data(classes=(0, 1))
    learner = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3)
    learner.fit(x, y)
    xu = np.random.default_rng(1).normal(size=(40, 1, 2, 2)).astype(np.float32) - 6
    targets = np.tile(np.array([[0.0, 0.1, 0.9]], np.float32), (40, 1))
    metrics = learner.distill(xu, targets)
    assert (learner.predict_proba(xu).argmax(1) == 2).mean() > 0.9
    assert learner.evaluate(x, y)["top1"] > 0.9  # private knowledge survives the refit
    assert metrics["target_agreement"] > 0.9 and metrics["refit_rejected"] == 0


def test_rejects_estimators_without_predict_proba():
    with pytest.raises(
        ValueError, match=r"^estimator = LinearSVC\(\) is not allowed; use a probabilistic .*"
    ):
        SklearnLearner(LinearSVC(), num_classes=2)
    with pytest.raises(ValueError, match=r"^num_classes must be >= 2, got 1$"):
        SklearnLearner(LogisticRegression(), num_classes=1)


# -- soft targets and what is kept ---------------------------------------------------------------
def test_soft_mass_moves_predictions_toward_the_second_class():
    x, y = data()
    xu = public()
    second = {}
    for mass in (0.0, 0.4):  # the same argmax (class 2), with or without mass on class 1
        learner = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3)
        learner.fit(x, y)
        learner.distill(xu, soft(len(xu), 3, 2, 1, mass))
        p = learner.predict_proba(xu)
        assert p[:, 2].mean() > p[:, 1].mean()  # the argmax is learned either way
        second[mass] = p[:, 1].mean()
    assert second[0.4] > second[0.0] + 0.1
    assert abs(second[0.4] - 0.4) < 0.15  # near the soft mass itself


def test_forest_leaves_hold_the_soft_mass():
    x, y = data()
    xu = public()
    learner = SklearnLearner(RandomForestClassifier(20, random_state=0), num_classes=3)
    learner.fit(x, y)
    learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
    p = learner.predict_proba(xu)
    assert 0.2 < p[:, 1].mean() < p[:, 2].mean()


def test_distilled_targets_survive_the_next_fit_and_change_pseudo_labels():
    x, y = data()
    xu = public()
    targets = soft(len(xu), 3, 2, 1, 0.3)
    alone = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3)
    alone.fit(x, y)
    first_round = alone.predict_proba(xu)
    alone.fit(x, y)
    taught = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3)
    taught.fit(x, y)
    taught.distill(xu, targets)
    metrics = taught.fit(x, y)
    p_alone, p_taught = alone.predict_proba(xu), taught.predict_proba(xu)
    assert np.allclose(p_alone, first_round)  # without distillation nothing changes
    assert np.abs(p_taught - p_alone).max() > 0.3  # the next round's pseudo-labels differ
    assert (p_taught.argmax(1) == 2).mean() > 0.8
    assert metrics["public_rows"] == len(xu) and metrics["rows"] > len(y)


def test_a_new_distill_replaces_the_remembered_targets():
    x, y = data()
    xu = public()
    learner = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3)
    learner.fit(x, y)
    learner.distill(xu, soft(len(xu), 3, 2, 1, 0.0))
    learner.distill(xu, soft(len(xu), 3, 1, 2, 0.0))
    learner.fit(x, y)
    assert (learner.predict_proba(xu).argmax(1) == 1).mean() > 0.9


def test_public_weight_zero_ignores_the_targets():
    x, y = data()
    xu = public()
    learner = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3, public_weight=0.0)
    learner.fit(x, y)
    before = learner.predict_proba(xu)
    learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
    assert np.allclose(learner.predict_proba(xu), before, atol=1e-6)


class Recorder(ClassifierMixin, BaseEstimator):
    """A final Pipeline step that records the sample weights it is given."""

    def fit(self, x, y, sample_weight=None):
        self.classes_ = np.unique(y)
        self.seen_ = None if sample_weight is None else np.asarray(sample_weight)
        self.n_ = len(y)
        return self

    def predict_proba(self, x):
        return np.full((len(x), len(self.classes_)), 1 / len(self.classes_))


def test_pipeline_final_step_gets_the_weights():
    x, y = data()
    xu = public()
    learner = SklearnLearner(
        Pipeline([("scale", StandardScaler()), ("clf", Recorder())]), num_classes=3
    )
    learner.fit(x, y)
    weights = np.linspace(0.5, 1.0, len(xu)).astype(np.float32)
    targets = soft(len(xu), 3, 2, 1, 0.25)
    metrics = learner.distill(xu, targets, weights)
    step = learner.estimator_.named_steps["clf"]
    assert step.seen_ is not None and len(step.seen_) == step.n_ == metrics["rows"]
    # private rows weigh 1; the public rows' copies carry target mass × weight
    assert np.isclose(step.seen_.sum(), len(y) + weights.sum())
    assert np.allclose(step.seen_[len(y) :: 2], 0.25 * weights)  # class 1's copy of each row
    assert np.allclose(step.seen_[len(y) + 1 :: 2], 0.75 * weights)


def test_estimator_without_weights_gets_argmax_labels_and_warns_once():
    x, y = data()
    xu = public()
    learner = SklearnLearner(KNeighborsClassifier(3), num_classes=3)
    learner.fit(x, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4), weights=np.ones(len(xu), np.float32))
        learner.fit(x, y)
        learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1 and "ignores sample weights" in messages[0], messages
    assert "KNeighborsClassifier" in messages[0] and "argmax" in messages[0]
    assert (learner.predict_proba(xu).argmax(1) == 2).all()
    declared = learner.capabilities
    assert not declared.soft_targets and "argmax" in declared.soft_targets_reason
    # declared per instance: a weighted estimator's learner keeps the class's default
    assert SklearnLearner(LogisticRegression(), num_classes=3).capabilities.soft_targets


@pytest.mark.parametrize(
    "estimator",
    [
        HistGradientBoostingClassifier(max_iter=20, random_state=0),
        pytest.param("xgboost", id="XGBClassifier"),
    ],
)
def test_client_missing_classes_works_with_contiguous_label_estimators(estimator):
    if estimator == "xgboost":
        xgboost = pytest.importorskip("xgboost")
        estimator = xgboost.XGBClassifier(n_estimators=10, n_jobs=1)  # needs labels 0..k-1
    x, y = data(classes=(1, 3))
    learner = SklearnLearner(estimator, num_classes=5)
    learner.fit(x, y)
    p = learner.predict_proba(x)
    assert np.allclose(p[:, [0, 2, 4]], 0) and learner.evaluate(x, y)["top1"] > 0.9
    learner.distill(public(), soft(40, 5, 4, 1, 0.3))  # a class no private row has
    assert learner.predict_proba(public())[:, 4].mean() > 0.5
    assert np.allclose(learner.predict_proba(x)[:, [0, 2]], 0)


def test_a_single_class_client_predicts_its_class():
    x, _ = data()
    learner = SklearnLearner(LogisticRegression(), num_classes=3)
    learner.fit(x, np.full(len(x), 2))
    assert np.allclose(learner.predict_proba(x[:5]), [0, 0, 1])


def test_same_random_state_and_calls_give_the_same_predictions():
    x, y = data()
    xu = public()
    runs = []
    for _ in range(2):
        learner = SklearnLearner(RandomForestClassifier(10, random_state=3), num_classes=3)
        learner.fit(x, y)
        learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
        learner.fit(x, y)
        runs.append(learner.predict_proba(xu))
    assert np.array_equal(runs[0], runs[1])


def test_checkpoint_holds_the_remembered_targets():
    x, y = data()
    xu = public()
    learner = SklearnLearner(RandomForestClassifier(10, random_state=0), num_classes=3)
    learner.fit(x, y)
    learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
    state = pickle.loads(pickle.dumps(learner.get_state()))
    resumed = SklearnLearner(RandomForestClassifier(10, random_state=0), num_classes=3)
    resumed.set_state(state)
    assert np.array_equal(resumed.predict_proba(xu), learner.predict_proba(xu))
    learner.fit(x, y)
    resumed.fit(x, y)
    fresh = SklearnLearner(RandomForestClassifier(10, random_state=0), num_classes=3)
    fresh.fit(x, y)
    assert np.array_equal(resumed.predict_proba(xu), learner.predict_proba(xu))
    assert not np.allclose(fresh.predict_proba(xu), learner.predict_proba(xu))


def test_a_checkpoint_from_before_soft_targets_loads():
    x, y = data(classes=(1, 3))
    old = LogisticRegression().fit(x.reshape(60, -1), y)  # trained on the raw labels
    learner = SklearnLearner(LogisticRegression(), num_classes=5)
    learner.set_state({"estimator": old, "private": (x.reshape(60, -1), y)})
    p = learner.predict_proba(x)
    assert np.allclose(p[:, [1, 3]], old.predict_proba(x.reshape(60, -1)), atol=1e-6)


# -- the divergence guard ------------------------------------------------------------------------
class Centroids(ClassifierMixin, BaseEstimator):
    """Weighted nearest centroid; diverges (a constant, wrong prediction: the rarest class, or
    NaN) when trained on unevenly weighted rows, as a distillation refit is, and `diverges`."""

    diverges = True

    def fit(self, x, y, sample_weight=None):
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        self.classes_ = np.unique(y)
        self.centres_ = np.stack([np.average(x[y == c], 0, w[y == c]) for c in self.classes_])
        counts = np.bincount(y, minlength=len(self.classes_))
        self.broken_ = self.diverges and not np.allclose(w, 1)
        self.rarest_ = int(np.argmin(counts))
        return self

    def predict_proba(self, x):
        if self.broken_:
            return np.eye(len(self.classes_))[np.full(len(x), self.rarest_)]
        d = ((x[:, None, :] - self.centres_[None]) ** 2).sum(-1)
        e = np.exp(-(d - d.min(1, keepdims=True)))
        return e / e.sum(1, keepdims=True)


class WithRate(Centroids):
    def __init__(self, learning_rate=0.1, stable_below=0.03):
        self.learning_rate, self.stable_below = learning_rate, stable_below

    @property
    def diverges(self):
        return self.learning_rate > self.stable_below


class Scrambled(WithRate):
    """Diverges as HistGradientBoosting did: confident and wrong on most classes, right on a
    few, so its accuracy beats a constant but its log-loss is far worse than the prior's."""

    def predict_proba(self, x):
        if not self.broken_:
            return super().predict_proba(x)
        k = len(self.classes_)
        nearest = ((x[:, None, :] - self.centres_[None]) ** 2).sum(-1).argmin(1)
        scrambled = np.where(nearest < 3, nearest, 3 + (nearest - 2) % (k - 3))
        return np.eye(k)[scrambled]


class NaNs(Centroids):
    def predict_proba(self, x):
        p = super().predict_proba(x)
        return np.full_like(p, np.nan) if self.broken_ else p


def three_class_data():
    x, y = data(classes=(0, 1, 2), n=90)
    return x, y


def test_diverged_refit_is_retried_with_a_smaller_learning_rate():
    x, y = three_class_data()
    xu = public()
    learner = SklearnLearner(WithRate(learning_rate=0.1, stable_below=0.03), num_classes=3)
    fit_metrics = learner.fit(x, y)
    with pytest.warns(UserWarning, match=r"WithRate.*diverged") as caught:
        metrics = learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
    message = str(caught[0].message)
    assert f"previous model {fit_metrics['train_top1']:.3f}" in message
    assert learner.estimator_.learning_rate == pytest.approx(0.1 / 4)  # 0.05 still diverges
    assert metrics["refit_retries"] == 2 and metrics["refit_rejected"] == 0
    assert metrics["train_top1"] >= fit_metrics["train_top1"] - learner.divergence_tolerance
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the smaller rate is kept: no retry, no warning
        again = learner.fit(x, y)
    assert again["refit_retries"] == 0 and learner.estimator_.learning_rate == pytest.approx(0.025)


@pytest.mark.parametrize(
    ("estimator", "max_retries"),
    [(Centroids(), 3), (NaNs(), 3), (WithRate(learning_rate=0.1, stable_below=0.03), 1)],
    ids=["no learning rate", "non-finite probabilities", "retries exhausted"],
)
def test_diverged_refit_is_rejected_and_the_previous_model_stays(estimator, max_retries):
    x, y = three_class_data()
    xu = public()
    learner = SklearnLearner(estimator, num_classes=3, max_retries=max_retries)
    learner.fit(x, y)
    before = learner.predict_proba(xu)
    with pytest.warns(UserWarning, match="rejected; the previous model stays"):
        metrics = learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
    assert metrics["refit_rejected"] == 1
    assert np.array_equal(learner.predict_proba(xu), before)
    assert learner.evaluate(x, y)["top1"] > 0.9
    # the rejected targets are not remembered: the next fit is the private data alone again
    learner.fit(x, y)
    assert np.array_equal(learner.predict_proba(xu), before)


def test_confidently_wrong_refit_is_caught_even_when_it_beats_a_constant():
    x, y = data(classes=tuple(range(10)), n=200)
    xu = public()
    learner = SklearnLearner(Scrambled(learning_rate=0.1, stable_below=0.06), num_classes=10)
    before = learner.fit(x, y)["train_top1"]
    with pytest.warns(UserWarning, match="diverged.*log-loss"):
        metrics = learner.distill(xu, soft(len(xu), 10, 2, 1, 0.4))
    assert metrics["refit_retries"] == 1 and metrics["refit_rejected"] == 0
    assert metrics["train_top1"] > before - 0.1 > 0.5


def test_a_refit_that_fits_conflicting_targets_is_deployed_with_a_warning():
    # Public rows beyond class 0 (x0 = -6) with mass on class 1 (x0 = +4): a linear model
    # cannot place class 1 on both sides, so private accuracy drops although the refit fits
    # its training rows; that is a conflict to report, not a divergence to reject.
    x, y = data()
    xu = public()
    xu[:, 0, 0, 1] -= 6
    xu[:, 0, 0, 0] -= 6
    learner = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3)
    before = learner.fit(x, y)["train_top1"]
    with pytest.warns(UserWarning, match="targets conflict with the private labels"):
        metrics = learner.distill(xu, soft(len(xu), 3, 2, 1, 0.4))
    assert metrics["refit_rejected"] == 0 and metrics["private_top1_fell"] == 1
    assert metrics["train_top1"] < before - learner.divergence_tolerance


def test_ordinary_distillation_toward_other_classes_is_not_rejected():
    x, y = three_class_data()
    rng = np.random.default_rng(5)
    targets = np.eye(3, dtype=np.float32)[(y + rng.integers(1, 3, len(y))) % 3]  # all disagree
    learner = SklearnLearner(LogisticRegression(max_iter=500), num_classes=3)
    learner.fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = learner.distill(x[: len(y) // 10], targets[: len(y) // 10])
    assert metrics["refit_rejected"] == 0 and metrics["refit_retries"] == 0


def test_divergence_tolerance_is_validated():
    with pytest.raises(ValueError, match="divergence_tolerance"):
        SklearnLearner(LogisticRegression(), num_classes=3, divergence_tolerance=2.0)
