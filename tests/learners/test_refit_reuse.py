"""RefitLearner does no work twice: each unique row is predicted once per check, and a refit
whose inputs are those of the model in place reuses it, with the records of a recomputed fit."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from cosmosfl.learners import LightGBMLearner, SklearnLearner, XGBoostLearner


def sklearn_forest():
    return SklearnLearner(RandomForestClassifier(n_estimators=10, random_state=0), num_classes=4)


def sklearn_logistic():
    return SklearnLearner(LogisticRegression(max_iter=200, random_state=0), num_classes=4)


def xgboost_learner():
    pytest.importorskip("xgboost")
    return XGBoostLearner(num_classes=4, num_trees=10)


def lightgbm_learner():
    pytest.importorskip("lightgbm")
    return LightGBMLearner(num_classes=4, num_trees=10, params={"min_data_in_leaf": 3})


def lightgbm_copies():
    pytest.importorskip("lightgbm")
    return LightGBMLearner(
        num_classes=4, num_trees=10, params={"min_data_in_leaf": 3}, soft_targets="copies"
    )


MAKERS = [sklearn_forest, sklearn_logistic, xgboost_learner, lightgbm_learner, lightgbm_copies]


@pytest.fixture(params=MAKERS, ids=lambda f: f.__name__)
def make(request):
    return request.param


def data(seed=0, n=80):
    rng = np.random.default_rng(seed)
    y = rng.choice(4, n)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    x[:, 0] += 2 * y
    xu = rng.normal(size=(50, 5)).astype(np.float32)
    xu[:, 0] += rng.uniform(0, 6, 50)
    return x, y, xu


def soft(seed, n=50):
    return np.random.default_rng(seed).dirichlet(np.ones(4), n).astype(np.float32)


class Counting:
    """Counts a learner's trainings and the rows it predicts."""

    def __init__(self, learner, monkeypatch):
        self.trained, self.predicted = 0, 0
        train, proba = learner._train_rows, learner._proba

        def counted_train(rows, **kw):
            self.trained += 1
            return train(rows, **kw)

        def counted_proba(model, x):
            self.predicted += len(x)
            return proba(model, x)

        monkeypatch.setattr(learner, "_train_rows", counted_train)
        monkeypatch.setattr(learner, "_proba", counted_proba)


def rounds(learner, x, y, xu):
    """A federation's calls on a refit learner: local fit, distill, fit, distill, fit, fit."""
    out = [learner.fit(x, y), learner.distill(xu, soft(1))]
    out += [learner.fit(x, y), learner.distill(xu, soft(2)), learner.fit(x, y)]
    out.append(learner.fit(x, y))
    return out, learner.predict_proba(xu)


def test_reuse_gives_the_records_of_a_recomputed_fit(make, monkeypatch):
    x, y, xu = data()
    reused, recomputed = make(), make()
    monkeypatch.setattr(recomputed, "_deterministic", lambda: False)  # never reuse
    count_reused = Counting(reused, monkeypatch)
    count_recomputed = Counting(recomputed, monkeypatch)
    metrics_a, probs_a = rounds(reused, x, y, xu)
    metrics_b, probs_b = rounds(recomputed, x, y, xu)
    assert metrics_a == metrics_b
    np.testing.assert_array_equal(probs_a, probs_b)
    assert count_recomputed.trained == 6
    # Every fit after a distill (and after a fit) has the inputs of the model in place.
    assert count_reused.trained == 3


def test_changed_inputs_train_again(monkeypatch):
    x, y, xu = data()
    learner = sklearn_logistic()
    count = Counting(learner, monkeypatch)
    learner.fit(x, y)
    learner.fit(x[:-1], y[:-1])  # other private rows
    learner.distill(xu, soft(1))
    learner.distill(xu, soft(2))  # other targets
    learner.public_weight = 0.5  # other settings
    learner.fit(x[:-1], y[:-1])
    assert count.trained == 5


def test_an_unseeded_estimator_is_never_reused(monkeypatch):
    x, y, _ = data()
    learner = SklearnLearner(RandomForestClassifier(n_estimators=5), num_classes=4)
    count = Counting(learner, monkeypatch)
    learner.fit(x, y)
    learner.fit(x, y)
    assert count.trained == 2


def test_a_check_predicts_each_unique_row_once(make, monkeypatch):
    x, y, xu = data()
    learner = make()
    learner.fit(x, y)
    count = Counting(learner, monkeypatch)
    metrics = learner.distill(xu, soft(1))
    assert metrics["refit_retries"] == 0 and metrics["rows"] >= len(x) + len(xu)
    # One prediction of the private and public rows (copies read theirs from it), reused for
    # target_agreement / target_kl; the previous model's accuracy came from its own check.
    assert count.predicted == len(x) + len(xu)


def test_a_restored_state_trains_once_then_reuses(monkeypatch):
    x, y, xu = data()
    learner = sklearn_forest()
    learner.fit(x, y)
    learner.distill(xu, soft(1))
    restored = sklearn_forest()
    restored.set_state(learner.get_state())
    count = Counting(restored, monkeypatch)
    assert restored.fit(x, y) == learner.fit(x, y)
    restored.fit(x, y)
    assert count.trained == 1
