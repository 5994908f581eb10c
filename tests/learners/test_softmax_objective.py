"""The boosters' soft-label softmax objective: its derivatives, and what it trains compared with
the weighted-copies route it replaces."""

import numpy as np
import pytest

from cosmosfl.learners import LightGBMLearner, XGBoostLearner
from cosmosfl.learners.softmax_objective import SoftmaxObjective, log_prior, softmax

LIBRARIES = {XGBoostLearner: "xgboost", LightGBMLearner: "lightgbm"}


@pytest.fixture(params=[XGBoostLearner, LightGBMLearner], ids=["xgboost", "lightgbm"])
def cls(request):
    pytest.importorskip(LIBRARIES[request.param])
    return request.param


def problem(seed=0, n=7, m=4):
    rng = np.random.default_rng(seed)
    targets = rng.dirichlet(np.ones(m), n)
    weights = rng.uniform(0.2, 2.0, n)
    scores = rng.normal(size=(n, m))
    base = rng.normal(size=m)
    return targets, weights, scores, base


def test_gradient_is_the_finite_difference_of_the_loss():
    targets, weights, scores, base = problem()
    objective = SoftmaxObjective(targets, weights, base)
    grad, _ = objective.gradients(scores)
    eps = 1e-6
    numeric = np.zeros_like(scores)
    for i, c in np.ndindex(*scores.shape):
        step = np.zeros_like(scores)
        step[i, c] = eps
        numeric[i, c] = (objective.loss(scores + step) - objective.loss(scores - step)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_hessian_is_the_finite_difference_of_the_gradient_on_the_diagonal():
    targets, weights, scores, base = problem(seed=1)
    objective = SoftmaxObjective(targets, weights, base)
    _, hess = objective.gradients(scores)
    eps = 1e-6
    numeric = np.zeros_like(scores)
    for i, c in np.ndindex(*scores.shape):
        step = np.zeros_like(scores)
        step[i, c] = eps
        up, _ = objective.gradients(scores + step)
        down, _ = objective.gradients(scores - step)
        numeric[i, c] = (up[i, c] - down[i, c]) / (2 * eps)
    np.testing.assert_allclose(hess, numeric, rtol=1e-5, atol=1e-9)
    scaled = SoftmaxObjective(targets, weights, base, hessian_factor=2.0).gradients(scores)[1]
    np.testing.assert_allclose(scaled, 2 * hess)


def test_copies_give_the_same_gradient_statistics_as_the_soft_row():
    # Summed over a row's copies (class c, weight w t_c, one-hot target), the statistics are
    # the soft row's: what makes N rows train what N x M copies did.
    targets, weights, scores, base = problem(seed=2)
    n, m = targets.shape
    soft_grad, soft_hess = SoftmaxObjective(targets, weights, base).gradients(scores)
    rows = np.repeat(np.arange(n), m)
    copies = SoftmaxObjective(
        np.tile(np.eye(m), (n, 1)), (targets * weights[:, None]).ravel(), base
    ).gradients(scores[rows])
    np.testing.assert_allclose(np.add.reduceat(copies[0], np.arange(0, n * m, m)), soft_grad)
    np.testing.assert_allclose(np.add.reduceat(copies[1], np.arange(0, n * m, m)), soft_hess)


def test_log_prior_is_the_weighted_class_frequency_with_a_floor():
    targets = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    base = log_prior(targets, np.array([1.0, 2.0]))
    np.testing.assert_allclose(np.exp(base[:2]), [2 / 3, 1 / 3])
    assert base[2] < -30  # an absent class starts with ~0 probability
    np.testing.assert_allclose(softmax(np.zeros((1, 3)) + base).sum(), 1.0)


def tabular(seed=0, n=300, m=5):
    rng = np.random.default_rng(seed)
    y = rng.choice(m, n)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    x[:, 0] += 1.5 * y
    xu = rng.normal(size=(200, 6)).astype(np.float32)
    xu[:, 0] += rng.uniform(0, 7, 200)
    return x, y, xu, rng.dirichlet(np.full(m, 0.5), 200)


def learner(cls, route, m=5):
    params = {"min_data_in_leaf": 5} if cls is LightGBMLearner else {}
    return cls(num_classes=m, num_trees=30, soft_targets=route, params=params)


def test_on_hard_labels_the_objective_is_the_library_objective(cls):
    # One-hot targets make the copies the rows themselves: the custom objective (its Hessian
    # scale and starting scores) must then grow the built-in objective's trees.
    rng = np.random.default_rng(3)
    y = rng.choice(5, 300, p=[0.4, 0.3, 0.2, 0.1, 0.0])
    x = rng.normal(size=(300, 6)).astype(np.float32)
    x[:, 0] += 1.5 * y
    probs = {}
    for route in ("objective", "copies"):
        model = learner(cls, route)
        model.fit(x, y)
        probs[route] = model.predict_proba(x)
    np.testing.assert_allclose(probs["objective"], probs["copies"], atol=1e-5)


def test_soft_targets_match_the_copies_route_within_tolerance(cls):
    x, y, xu, targets = tabular()
    probs, metrics = {}, {}
    for route in ("objective", "copies"):
        model = learner(cls, route)
        model.fit(x, y)
        metrics[route] = model.distill(xu, targets)
        probs[route] = model.predict_proba(np.concatenate([x, xu]))
    a, b = probs["objective"], probs["copies"]
    # Only the histogram bins (N rows vs the copies) and the copies dropped below
    # min_target_mass differ: predictions agree closely, not exactly.
    assert np.abs(a - b).mean() < 0.03
    assert (a.argmax(1) == b.argmax(1)).mean() > 0.93
    assert abs(metrics["objective"]["target_kl"] - metrics["copies"]["target_kl"]) < 0.03
    assert metrics["objective"]["rows"] == len(x) + len(xu)  # N rows, no copies
    assert metrics["copies"]["rows"] > 2 * (len(x) + len(xu))


def test_objective_route_checkpoints_and_continues_boosting(cls):
    x, y, xu, targets = tabular(seed=4)
    a = learner(cls, "objective")
    a.fit(x, y)
    a.distill(xu, targets)
    b = learner(cls, "objective")
    b.set_state(a.get_state())
    np.testing.assert_array_equal(a.predict_proba(xu), b.predict_proba(xu))
    grown = cls(num_classes=5, num_trees=10, trees_per_call=5, continue_boosting=True)
    grown.fit(x, y)
    before = grown.evaluate(x, y)["top1"]
    grown.distill(xu, targets)
    assert grown._num_rounds(grown._model) == 15
    assert grown.evaluate(x, y)["top1"] > before - 0.2


def test_unknown_soft_targets_route_is_refused(cls):
    with pytest.raises(ValueError, match="soft_targets"):
        cls(num_classes=3, soft_targets="weights")


def test_a_model_that_cannot_split_predicts_the_class_frequencies(cls):
    # Constant features (for LightGBM also 30 rows, under its min_data_in_leaf of 20 a side):
    # no tree can split, and the model is the built-in objective's, the class frequencies.
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(30, 5)).astype(np.float32), rng.choice(4, 30)
    frequencies = np.bincount(y, minlength=4) / 30
    inputs = [np.ones_like(x)] + ([x] if cls is LightGBMLearner else [])
    for rows in inputs:
        model = cls(num_classes=4)
        model.fit(rows, y)
        np.testing.assert_allclose(model.predict_proba(rows[:3]), [frequencies] * 3, atol=1e-4)
