import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.svm import LinearSVC

from cosmosfl.learners import SklearnLearner


def data(classes=(0, 1), n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.choice(classes, n)
    x = rng.normal(size=(n, 1, 2, 2)).astype(np.float32)
    x[:, 0, 0, 0] += 4 * y
    return x, y.astype(np.int64)


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
    learner.distill(xu, targets)
    assert (learner.predict_proba(xu).argmax(1) == 2).mean() > 0.9
    assert learner.evaluate(x, y)["top1"] > 0.9  # private knowledge survives the refit


def test_estimator_without_sample_weight_still_distills():
    x, y = data()
    learner = SklearnLearner(KNeighborsClassifier(3), num_classes=2)
    learner.fit(x, y)
    learner.distill(x, np.eye(2, dtype=np.float32)[y], weights=np.ones(60, np.float32))
    assert learner.evaluate(x, y)["top1"] > 0.9


def test_rejects_estimators_without_predict_proba():
    with pytest.raises(TypeError, match="predict_proba"):
        SklearnLearner(LinearSVC(), num_classes=2)
    with pytest.raises(ValueError, match="num_classes"):
        SklearnLearner(LogisticRegression(), num_classes=1)
