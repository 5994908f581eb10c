"""Training h_k by held-out fidelity to its teacher (algorithms/cosmos_server.py): it stops
when a planted over-fit sets in and keeps the best state; it trains on while it improves."""

import numpy as np
import torch
from torch import nn

from cosmosfl import TorchLearner
from cosmosfl.algorithms.cosmos_server import (
    ServerFit,
    fidelity,
    holdout_rows,
    train_server_model,
)


def _learner(seed: int = 0) -> TorchLearner:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 4))
    return TorchLearner(net, num_classes=4, distill_lr=1e-3, seed=seed)


def _public(n: int = 400) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(n, 8)).astype(np.float32)


def _fit(max_epochs: int, n: int = 400) -> ServerFit:
    return ServerFit(
        "fidelity",
        epochs=5,
        lam=0.0,
        holdout=holdout_rows(n, 0.25, seed=3),
        max_epochs=max_epochs,
        patience=1,
        lr=1e-2,
    )


def test_a_planted_over_fit_stops_training_early_and_keeps_the_best_state():
    x = _public()
    # A teacher with no structure: each row's class is drawn at random, so what h learns of
    # the training rows cannot carry over, and held-out fidelity worsens once it memorises.
    rng = np.random.default_rng(1)
    teacher = np.eye(4, dtype=np.float32)[rng.integers(0, 4, len(x))] * 0.97 + 0.0075
    fit = _fit(max_epochs=200)
    model, stats, h_u = train_server_model(x, (_learner(), teacher, fit))
    assert stats["epochs"] < fit.max_epochs  # it stopped on its own
    assert stats["epochs"] <= stats["best_epoch"] + fit.patience + 1
    # The model kept is the best one seen on the held-out rows, not the last one trained.
    held = fidelity(model, x[fit.holdout], teacher[fit.holdout])
    assert np.isclose(held["kl"], stats["fidelity_kl"], rtol=1e-5)
    np.testing.assert_allclose(h_u, model.predict_proba(x), rtol=1e-6)
    # Training on regardless for the same number of epochs ends further from the teacher.
    longer = _learner()
    longer.distill_lr = 1e-2
    keep = np.setdiff1d(np.arange(len(x)), fit.holdout)
    longer.distill(x[keep], teacher[keep], epochs=int(stats["epochs"]) + 20)
    assert fidelity(longer, x[fit.holdout], teacher[fit.holdout])["kl"] > stats["fidelity_kl"]


def test_a_learnable_teacher_is_followed_until_fidelity_stops_improving():
    x = _public()
    w = np.random.default_rng(2).normal(size=(8, 4))
    teacher = np.eye(4, dtype=np.float32)[(x @ w).argmax(axis=1)] * 0.97 + 0.0075
    fit = _fit(max_epochs=60)
    _, stats, _ = train_server_model(x, (_learner(), teacher, fit))
    assert stats["best_epoch"] > 5
    assert stats["fidelity_agreement"] > 0.85 > stats["fidelity_agreement_start"]
    assert stats["fidelity_kl"] < stats["fidelity_kl_start"]


def test_the_rate_is_restored_for_the_next_round_and_fixed_mode_trains_its_epochs():
    x = _public()
    teacher = np.full((len(x), 4), 0.25, dtype=np.float32)
    model = _learner()
    train_server_model(x, (model, teacher, _fit(max_epochs=10)))
    assert model.distill_lr == 1e-2
    fixed = ServerFit("fixed", epochs=3, lam=0.0, lr=None)
    model2 = _learner()
    _, stats, _ = train_server_model(x, (model2, teacher, fixed))
    assert "fidelity_kl" not in stats and model2.distill_lr == 1e-3


def test_holdout_rows_are_seeded_and_leave_rows_to_train_on():
    a, b = holdout_rows(10, 0.2, seed=5), holdout_rows(10, 0.2, seed=5)
    np.testing.assert_array_equal(a, b)
    assert len(a) == 2 and len(holdout_rows(3, 0.99, seed=5)) == 2
