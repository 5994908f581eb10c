"""DP-SGD (Opacus) and subsample-and-aggregate as learners: what each fit is charged, what a
refused fit leaves, and what one record can move."""

import numpy as np
import pytest

pytest.importorskip("opacus")
pytest.importorskip("dp_accounting")

from sklearn.linear_model import LogisticRegression

from cosmosfl.learners.sklearn import SklearnLearner
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import build_model_for
from cosmosfl.privacy.accountant import SiteAccountant
from cosmosfl.privacy.aggregate import (
    SubsampleAggregateLearner,
    noisy_release,
    shard_of,
    vote_histogram,
)
from cosmosfl.privacy.dpsgd import DPSGDLearner, dpsgd_charge

DELTA = 1e-5
M = 4


def data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, M, n)
    x = (rng.normal(size=(n, 6)) + y[:, None]).astype(np.float32)
    return x, y


def dpsgd_learner(model="cnn", budget=None, z=1.1):
    shape = (1, 8, 8) if model == "cnn" else (6,)
    net = build_model_for(model, shape, num_classes=M, seed=1)
    inner = TorchLearner(net, num_classes=M, batch_size=16, seed=2)
    return DPSGDLearner(inner, SiteAccountant(budget, DELTA), noise_multiplier=z)


def test_opacus_accountant_and_ours_agree_on_dpsgd_epsilon():
    learner = dpsgd_learner("mlp")
    x, y = data()
    learner.fit(x, y, epochs=2)
    learner.fit(x, y, epochs=1)
    ours = learner.accountant.spent
    theirs = learner.opacus_accountant.get_epsilon(DELTA)
    # Same events (Opacus records each step's rate and noise); our RDP orders start at 2, so
    # ours may only be the larger (more conservative), and by very little.
    assert theirs * (1 - 1e-9) <= ours <= theirs * 1.005
    charge = dpsgd_charge(len(x), 16, 2, 1.1)
    assert sum(steps for _, _, steps in learner.opacus_accountant.history) == 3 * charge.steps // 2


def test_batchnorm_model_is_made_private_and_still_predicts():
    learner = dpsgd_learner("cnn")
    x = np.random.default_rng(0).normal(size=(40, 1, 8, 8)).astype(np.float32)
    y = np.arange(40) % M
    metrics = learner.fit(x, y, epochs=1)
    assert metrics["privacy_fits"] == 1 and np.isfinite(metrics["loss"])
    probs = learner.predict_proba(x)
    assert probs.shape == (40, M) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    learner.distill(x, probs, epochs=1)  # plain torch after the fit: no Opacus hooks left


@pytest.mark.parametrize("mechanism", ["dpsgd", "subsample-aggregate"])
def test_site_over_its_budget_trains_no_more(mechanism):
    x, y = data()
    if mechanism == "dpsgd":
        learner = dpsgd_learner("mlp")
    else:
        base = SklearnLearner(LogisticRegression(max_iter=200), num_classes=M)
        u = data(30, seed=1)[0]
        learner = SubsampleAggregateLearner(
            base, u, SiteAccountant(None, DELTA), shards=4, noise_multiplier=3.0, seed=5
        )
    learner.fit(x, y, epochs=1)
    learner.fit(x, y, epochs=1)
    learner.accountant.budget = learner.accountant.spent  # two fits spent it all
    before = learner.get_state()
    probs = learner.predict_proba(x)
    for _ in range(2):
        refused = learner.fit(x, y, epochs=1)
        assert refused["privacy_refused"] == 1 and "loss" not in refused
        assert refused["privacy_fits"] == 2
        assert refused["privacy_epsilon"] == before_spent(before, learner)
    np.testing.assert_array_equal(learner.predict_proba(x), probs)  # the last model is kept
    assert learner.get_state()["accountant"]["charges"] == before["accountant"]["charges"]


def before_spent(state, learner):
    assert state["accountant"]["spent"] == learner.accountant.spent
    return learner.accountant.spent


def release_and_votes(x, y, u, seed=7):
    base = SklearnLearner(LogisticRegression(max_iter=300), num_classes=M)
    learner = SubsampleAggregateLearner(
        base, u, SiteAccountant(None, DELTA), shards=4, noise_multiplier=0.5, seed=seed
    )
    votes = learner.shard_votes(x, y, epochs=1)
    hist = vote_histogram(votes, M)
    release = noisy_release(hist, learner.sigma, np.random.default_rng(seed))
    return learner, votes, hist, release


def test_subsample_aggregate_release_is_a_function_of_the_shard_models_only():
    x, y = data()
    u = data(50, seed=3)[0]
    base = SklearnLearner(LogisticRegression(max_iter=300), num_classes=M)
    learner = SubsampleAggregateLearner(
        base, u, SiteAccountant(None, DELTA), shards=4, noise_multiplier=0.5, seed=7
    )
    learner.fit(x, y, epochs=1)
    released = learner.predict_proba(u)
    # Rebuilt from the shard models' votes and the seeded noise alone: the same release.
    votes = np.stack([c.predict_proba(u).argmax(axis=1) for c in learner.copies])
    expected = noisy_release(vote_histogram(votes, M), learner.sigma, np.random.default_rng(7))
    np.testing.assert_array_equal(released, expected)
    # Changing one record changes only the votes of the copy whose shard holds it.
    for p in (0, 33, 79):
        x2, y2 = x.copy(), y.copy()
        x2[p] = x2[p] * -3.0 + 5.0
        y2[p] = (y2[p] + 1) % M
        _, v1, h1, _ = release_and_votes(x, y, u)
        _, v2, h2, _ = release_and_votes(x2, y2, u)
        shard = shard_of(len(x), 4, 7)[p]
        others = [s for s in range(4) if s != shard]
        np.testing.assert_array_equal(v1[others], v2[others])
        assert np.abs(h1 - h2).sum(axis=1).max() <= 2  # one vote moved per row of U, at most
    assert any(not np.array_equal(v1[shard], v2[shard]) for _ in [0])


def test_shards_depend_on_positions_only():
    a, b = shard_of(50, 5, 3), shard_of(50, 5, 3)
    np.testing.assert_array_equal(a, b)
    assert sorted(np.bincount(a)) == [10] * 5


def test_release_on_u_until_the_student_distils():
    x, y = data()
    u = data(30, seed=1)[0]
    base = SklearnLearner(LogisticRegression(max_iter=200), num_classes=M)
    learner = SubsampleAggregateLearner(
        base, u, SiteAccountant(None, DELTA), shards=4, noise_multiplier=0.5, seed=1
    )
    learner.fit(x, y, epochs=1)
    release = learner.predict_proba(u)
    assert np.allclose(release.sum(axis=1), 1, atol=1e-5)
    learner.distill(u, np.full((30, M), 1 / M, np.float32), epochs=1)
    np.testing.assert_array_equal(learner.predict_proba(u), learner.student.predict_proba(u))


def sa_learner(seed=5):
    base = SklearnLearner(LogisticRegression(max_iter=200), num_classes=M)
    u = data(30, seed=1)[0]
    return SubsampleAggregateLearner(
        base, u, SiteAccountant(None, DELTA), shards=4, noise_multiplier=1.0, seed=seed
    )


@pytest.mark.parametrize("make", [lambda: dpsgd_learner("mlp"), sa_learner])
def test_checkpoint_state_resumes_the_same_fits(make):
    x, y = data()
    a, b = make(), make()
    a.fit(x, y, epochs=1)
    b.set_state(a.get_state())
    assert b.accountant.spent == a.accountant.spent and b.accountant.charges
    np.testing.assert_array_equal(
        a.fit(x, y, epochs=1)["privacy_epsilon"], b.fit(x, y, epochs=1)["privacy_epsilon"]
    )
    np.testing.assert_allclose(a.predict_proba(x), b.predict_proba(x), atol=1e-6)
