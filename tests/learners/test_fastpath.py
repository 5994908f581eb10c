"""The fast path gives the reference's results within tolerance: bf16 autocast and
channels-last predictions on a fixed batch, channels-last training, and batched
(vmap-stacked) training of same-architecture models against per-model training."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.learners.batched import StackedModels
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import build_model


def net(seed=0, name="cnn"):
    return build_model(name, in_channels=3, num_classes=10, image_size=16, width=0.25, seed=seed)


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    return rng.standard_normal((48, 3, 16, 16)).astype(np.float32), rng.integers(0, 10, 48)


def learner(model, **kw):
    return TorchLearner(copy.deepcopy(model), num_classes=10, batch_size=16, seed=3, **kw)


def trained(batch):
    ref = learner(net())
    ref.fit(*batch, epochs=2)  # not just an initialisation: confident, varied predictions
    return ref.model


def test_bf16_predictions_match_fp32_within_tolerance(batch):
    model = trained(batch)
    fp32 = learner(model).predict_proba(batch[0])
    bf16 = learner(model, precision="bf16").predict_proba(batch[0])
    assert bf16.dtype == np.float32
    np.testing.assert_allclose(bf16.sum(axis=1), 1.0, atol=1e-5)
    # bfloat16 keeps 8 bits of mantissa: probabilities agree to about 1e-2.
    assert np.abs(bf16 - fp32).max() < 0.05
    assert (bf16.argmax(axis=1) == fp32.argmax(axis=1)).mean() >= 0.9


@pytest.mark.parametrize("name", ["cnn", "resnet8"])
def test_channels_last_predictions_equal_fp32(batch, name):
    model = net(name=name)
    ref = learner(model).predict_proba(batch[0])
    nhwc = learner(model, channels_last=True).predict_proba(batch[0])
    np.testing.assert_allclose(nhwc, ref, atol=1e-5)


def test_channels_last_training_equals_reference(batch):
    a, b = learner(net()), learner(net(), channels_last=True)
    a.fit(*batch, epochs=1)
    b.fit(*batch, epochs=1)
    targets = a.predict_proba(batch[0])
    a.distill(batch[0], targets, epochs=1, lam=1.0)
    b.distill(batch[0], targets, epochs=1, lam=1.0)
    for p, q in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True):
        torch.testing.assert_close(p.float(), q.float(), atol=1e-4, rtol=1e-4)


def test_bf16_training_runs_and_keeps_float32_weights(batch):
    lr = learner(net(), precision="bf16")
    before = copy.deepcopy(lr.model.state_dict())
    metrics = lr.fit(*batch, epochs=1)
    assert np.isfinite(metrics["loss"])
    assert all(p.dtype == torch.float32 for p in lr.model.parameters())
    assert any(not torch.equal(before[k], v) for k, v in lr.model.state_dict().items())
    assert np.isfinite(lr.distill(batch[0], lr.predict_proba(batch[0]), lam=1.0)["kl"])


def test_unknown_precision_is_rejected():
    with pytest.raises(ValueError, match="fp32, bf16"):
        learner(net(), precision="fp16")
    with pytest.raises(ConfigError, match=r"clients\.precision"):
        load_config(None, ["clients.precision=fp16"])
    cfg = load_config(None, ["clients.precision=bf16", "clients.channels_last=true"])
    assert (cfg.clients.precision, cfg.clients.channels_last) == ("bf16", True)


def test_stacked_training_equals_per_model_training(batch):
    x, y = torch.from_numpy(batch[0]), torch.from_numpy(batch[1])
    k = 3
    models = [net(seed=s) for s in range(k)]
    reference = [copy.deepcopy(m) for m in models]
    labels = torch.stack([y.roll(s) for s in range(k)])  # a different task per model
    g = torch.Generator().manual_seed(1)
    orders = [list(torch.randperm(len(x), generator=g).split(16)) for _ in range(k)]

    stacked = StackedModels(models)
    losses = stacked.fit(x, labels, orders, lr=1e-3)
    stacked.write_back()

    for i, m in enumerate(reference):
        m.train()
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        total = 0.0
        for idx in orders[i]:
            loss = F.cross_entropy(m(x[idx]), labels[i][idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        assert losses[i] == pytest.approx(total / len(x), rel=1e-5)
        for name, value in m.state_dict().items():  # weights and BatchNorm statistics
            if value.dtype.is_floating_point:
                torch.testing.assert_close(
                    models[i].state_dict()[name], value, atol=1e-5, rtol=1e-4
                )


def test_stacked_models_need_one_architecture():
    with pytest.raises(ValueError, match="architecture"):
        StackedModels([net(), net(name="resnet8")])
