"""Tree classifiers learn soft targets through regressor trees (learners/soft_trees.py): the
same trees as the classifier on the weighted copies, without the copies."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from cosmosfl.learners.sklearn import SklearnLearner
from cosmosfl.learners.soft_trees import SoftTrees, tree_twin, twin_reason


def _problem(classes: int = 4, seed: int = 0) -> tuple[np.ndarray, ...]:
    x, y = make_classification(
        400, 8, n_informative=5, n_classes=classes, n_clusters_per_class=1, random_state=seed
    )
    targets = np.random.default_rng(seed).dirichlet(np.ones(classes), size=300)
    return x[:100], y[:100], x[100:], targets


def _distilled(estimator: object, soft_targets: str, **options: object) -> SklearnLearner:
    xp, yp, xu, targets = _problem()
    learner = SklearnLearner(estimator, num_classes=4, soft_targets=soft_targets, **options)
    learner.fit(xp, yp)
    learner.distill(xu, targets)
    return learner


def test_a_tree_on_soft_targets_equals_the_tree_on_weighted_copies():
    # Gini on copies and squared error on the class mass choose the same splits and leaves.
    x = np.concatenate(_problem()[::2])
    tree = DecisionTreeClassifier(max_depth=4, random_state=0)
    copies = _distilled(tree, "copies")
    twin = _distilled(tree, "twin")
    assert isinstance(twin.estimator_, SoftTrees)
    assert not isinstance(copies.estimator_, SoftTrees)
    np.testing.assert_allclose(twin.predict_proba(x), copies.predict_proba(x), atol=1e-6)


def test_extra_trees_without_bootstrap_equal_the_forest_on_weighted_copies():
    # Same per-tree seeds, same random thresholds: the same forest, tree for tree.
    x = np.concatenate(_problem()[::2])
    forest = ExtraTreesClassifier(15, random_state=4)
    copies = _distilled(forest, "copies")
    twin = _distilled(forest, "twin")
    np.testing.assert_allclose(twin.predict_proba(x), copies.predict_proba(x), atol=1e-6)


def test_a_bagged_forest_draws_its_bootstraps_over_the_copies_as_the_classifier_does():
    # Each tree's bootstrap is drawn over the copies with the classifier's seeds and rule, so
    # the forests agree up to ties between equally good splits (which summation order breaks).
    x = np.concatenate(_problem()[::2])
    forest = RandomForestClassifier(60, random_state=5)
    copies = _distilled(forest, "copies").predict_proba(x)
    twin = _distilled(forest, "twin").predict_proba(x)
    assert (copies.argmax(axis=1) == twin.argmax(axis=1)).mean() > 0.97
    assert np.abs(copies - twin).mean() < 0.02
    # A forest that bootstraps rows instead (scikit-learn's regressor) is another model.
    xp, yp, xu, targets = _problem()
    rows_forest = RandomForestRegressor(60, max_features="sqrt", random_state=5).fit(
        np.concatenate([xp, xu]), np.concatenate([np.eye(4)[yp], targets])
    )
    assert np.abs(copies - rows_forest.predict(x)).mean() > 2 * np.abs(copies - twin).mean()


def test_trees_grown_in_threads_equal_trees_grown_in_turn():
    x = np.concatenate(_problem()[::2])
    serial = _distilled(RandomForestClassifier(12, random_state=1, n_jobs=1), "twin")
    threads = _distilled(RandomForestClassifier(12, random_state=1, n_jobs=2), "twin")
    np.testing.assert_array_equal(serial.predict_proba(x), threads.predict_proba(x))


def test_the_twin_trains_on_the_unique_rows_and_the_copies_on_many_more():
    copies = _distilled(RandomForestClassifier(20, random_state=0), "copies")
    _, _, xu, targets = _problem()
    twin = SklearnLearner(RandomForestClassifier(20, random_state=0), num_classes=4)
    xp, yp, _, _ = _problem()
    twin.fit(xp, yp)
    rows_twin = twin.distill(xu, targets)["rows"]
    rows_copies = copies.distill(xu, targets)["rows"]
    assert rows_twin == len(xp) + len(xu)
    assert rows_copies > 2 * rows_twin
    assert twin.predict_proba(xu).shape == (len(xu), 4)
    np.testing.assert_allclose(twin.predict_proba(xu).sum(axis=1), 1.0, atol=1e-6)


def test_private_rows_alone_train_the_users_classifier_itself():
    # `local` and a first fit have hard labels only: no twin, the classifier as given.
    xp, yp, xu, _ = _problem()
    learner = SklearnLearner(RandomForestClassifier(20, random_state=3), num_classes=4)
    learner.fit(xp, yp)
    assert isinstance(learner.estimator_, RandomForestClassifier)
    # Weighted (all ones) as the learner passes its rows' weights.
    plain = RandomForestClassifier(20, random_state=3).fit(xp, yp, sample_weight=np.ones(len(yp)))
    np.testing.assert_allclose(learner.predict_proba(xu), plain.predict_proba(xu), atol=1e-6)


@pytest.mark.filterwarnings("ignore:Some inputs do not have OOB scores")
@pytest.mark.parametrize(
    ("estimator", "reason"),
    [
        (LogisticRegression(), "no regressor twin"),
        (RandomForestClassifier(criterion="entropy"), "Gini"),
        (ExtraTreesClassifier(class_weight="balanced"), "class_weight"),
        (RandomForestClassifier(oob_score=True), "oob_score"),
    ],
)
def test_estimators_without_an_equal_twin_keep_the_copies_and_twin_says_why(estimator, reason):
    assert reason in twin_reason(estimator)
    auto = _distilled(estimator, "auto")
    assert not isinstance(auto.estimator_, SoftTrees)
    with pytest.raises(ValueError, match=reason):
        SklearnLearner(estimator, num_classes=4, soft_targets="twin")


def test_a_forests_trees_carry_every_tree_setting_and_the_forests_max_features():
    forest = RandomForestClassifier(n_estimators=7, max_depth=5, min_samples_leaf=2)
    twin = tree_twin(forest, seed=11)
    assert type(twin).__name__ == "DecisionTreeRegressor"
    params = twin.get_params()
    assert params["max_depth"] == 5 and params["min_samples_leaf"] == 2
    assert params["random_state"] == 11
    # A lone tree's default is all features; the forest's is sqrt.
    assert params["max_features"] == forest.get_params()["max_features"] == "sqrt"
    assert params["criterion"] == "squared_error"
    assert type(tree_twin(ExtraTreesClassifier(), seed=0)).__name__ == "ExtraTreeRegressor"


def test_an_unknown_soft_targets_setting_is_refused():
    with pytest.raises(ValueError, match="soft_targets"):
        SklearnLearner(RandomForestClassifier(), num_classes=4, soft_targets="regression")


def test_the_twin_route_resumes_from_its_state_exactly():
    learner = _distilled(RandomForestClassifier(10, random_state=0), "auto")
    other = SklearnLearner(RandomForestClassifier(10, random_state=0), num_classes=4)
    other.set_state(learner.get_state())
    x = _problem()[2]
    np.testing.assert_array_equal(other.predict_proba(x), learner.predict_proba(x))
