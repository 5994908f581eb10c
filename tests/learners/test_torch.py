import numpy as np
import pytest
import torch
from torch import nn

from cosmosfl.data.augment import Augmentation
from cosmosfl.learners import TorchLearner, resolve_device


def make_data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 1, 4, 4)).astype(np.float32)
    x[:, 0, 0, :] += 3 * y[:, None]  # a learnable signal
    return x, y.astype(np.int64)


def net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Flatten(), nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3)
    )


def params(learner):
    return torch.cat([p.detach().flatten().clone() for p in learner.model.parameters()])


def test_fit_learns_and_predict_proba_is_on_simplex():
    x, y = make_data()
    learner = TorchLearner(net(), seed=0, batch_size=16, lr=1e-2)
    assert learner.num_classes == 3
    before = learner.evaluate(x, y)["top1"]
    learner.fit(x, y, epochs=30)
    p = learner.predict_proba(x)
    assert p.shape == (64, 3) and p.dtype == np.float32
    assert np.allclose(p.sum(1), 1, atol=1e-5)
    assert learner.evaluate(x, y)["top1"] > max(before, 0.8)


def test_same_seed_same_result_different_seed_differs():
    x, y = make_data()
    a, b, c = (TorchLearner(net(), seed=s) for s in (1, 1, 2))
    for learner in (a, b, c):
        learner.fit(x, y, epochs=2)
    assert torch.equal(params(a), params(b))
    assert not torch.equal(params(a), params(c))


def test_result_does_not_depend_on_global_rng_or_call_interleaving():
    x, y = make_data()
    a, b = TorchLearner(net(), seed=3), TorchLearner(net(), seed=3)
    a.fit(x, y, epochs=1)
    torch.manual_seed(12345)  # other code touching the global RNG must not matter
    other = TorchLearner(net(), seed=9)
    other.fit(x, y, epochs=1)
    b.fit(x, y, epochs=1)
    assert torch.equal(params(a), params(b))


def test_distill_moves_predictions_towards_targets():
    x, _ = make_data()
    targets = np.zeros((64, 3), np.float32)
    targets[:, 2] = 1.0
    learner = TorchLearner(net(), seed=0, distill_lr=1e-2)
    before = learner.predict_proba(x)[:, 2].mean()
    out = learner.distill(x, targets, epochs=5)
    assert learner.predict_proba(x)[:, 2].mean() > max(before, 0.9)
    assert out["consistency"] == 0.0  # λ = 0: no regulariser computed


def test_consistency_regulariser_carries_gradients():
    # The official code computed r_B without gradients, so λ changed nothing. Here one epoch
    # with λ = 5 must end somewhere else than the same epoch with λ = 0 (same seed, same batch
    # order: the batch order is drawn before any augmentation).
    x, _ = make_data()
    targets = np.random.default_rng(0).dirichlet(np.ones(3), 64).astype(np.float32)
    aug = Augmentation(max_shift=0.25, noise_std=0.5)
    a = TorchLearner(net(), seed=0, augmentation=aug)
    b = TorchLearner(net(), seed=0, augmentation=aug)
    out = a.distill(x, targets, epochs=1, lam=0.0)
    out_reg = b.distill(x, targets, epochs=1, lam=5.0)
    assert out["consistency"] == 0.0 and out_reg["consistency"] > 0
    assert not torch.equal(params(a), params(b))


def test_consistency_loss_gradient_reaches_both_views():
    from cosmosfl.core.distill import consistency_loss

    clean = torch.randn(4, 3, requires_grad=True)
    neighbour = torch.randn(4, 3, requires_grad=True)
    consistency_loss(neighbour, clean).backward()
    assert clean.grad.abs().sum() > 0 and neighbour.grad.abs().sum() > 0


def test_weights_zero_means_no_update():
    x, _ = make_data()
    targets = np.full((64, 3), 1 / 3, np.float32)
    targets[:, 0] = 0.9
    targets[:, 1:] = 0.05
    learner = TorchLearner(net(), seed=0, distill_lr=1e-2, clip_norm=None)
    learner.model.train = lambda mode=True: learner.model
    start = params(learner)
    learner.distill(x, targets, np.zeros(64, np.float32), epochs=1, lam=1.0)
    assert torch.allclose(params(learner), start)


def test_state_round_trip_restores_model_and_rng():
    x, y = make_data()
    a = TorchLearner(net(), seed=5)
    a.fit(x, y, epochs=1)
    state = a.get_state()
    a.fit(x, y, epochs=1)
    b = TorchLearner(net(99), seed=0)
    b.set_state(state)
    b.fit(x, y, epochs=1)
    assert torch.equal(params(a), params(b))


def test_invalid_arguments():
    with pytest.raises(ValueError, match="lr"):
        TorchLearner(net(), lr=0)
    with pytest.raises(ValueError, match="batch_size"):
        TorchLearner(net(), batch_size=0)
    with pytest.raises(ValueError, match="consistency_samples"):
        TorchLearner(net(), consistency_samples=0)
    x, y = make_data()
    with pytest.raises(ValueError, match="samples"):
        TorchLearner(net()).fit(x, y[:10])


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda", "mps")
    with pytest.raises(ValueError, match="allowed"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            resolve_device("cuda")
