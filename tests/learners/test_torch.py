"""TorchLearner (learners/torch.py): fit, predict and distill, seeding and state; the fast path
(bf16 autocast and channels-last against the reference); the r_B and training options
(consistency target, BatchNorm statistics in the neighbour pass, training augmentation, the
per-epoch distillation losses); and parameter access (weights in and out, frozen parameters,
BatchNorm recalibration)."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

from cosmosfl.core.distill import consistency_loss
from cosmosfl.data.augment import Augmentation, CropFlip
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.handlers.fedbabu import frozen_parameters
from cosmosfl.learners import TorchLearner, resolve_device
from cosmosfl.models import build_model


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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": 0}, r"^lr must be > 0, got 0$"),
        ({"distill_lr": -1.0}, r"^distill_lr must be > 0, got -1.0$"),
        ({"lr": float("inf")}, r"^lr must be a finite number > 0, got inf$"),
        ({"eval_batch_size": 0}, r"^eval_batch_size must be >= 1, got 0$"),
        ({"consistency_samples": 0}, r"^consistency_samples \(\|S\|\) must be >= 1, got 0$"),
        ({"precision": "fp16"}, r"^precision 'fp16' is not supported; allowed: fp32, bf16$"),
    ],
)
def test_learner_constraints_are_checked_when_constructed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TorchLearner(net(), **kwargs)


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda", "mps")
    with pytest.raises(ValueError, match="allowed"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            resolve_device("cuda")


# The fast path: bf16 autocast and channels-last predictions on a fixed batch (the `batch`
# fixture of conftest.py), and channels-last training, against the reference.


def registry_net(seed=0, name="cnn"):
    return build_model(name, in_channels=3, num_classes=10, image_size=16, width=0.25, seed=seed)


def learner_for(model, **kw):
    return TorchLearner(copy.deepcopy(model), num_classes=10, batch_size=16, seed=3, **kw)


def trained(batch):
    ref = learner_for(registry_net())
    ref.fit(*batch, epochs=2)  # not just an initialisation: confident, varied predictions
    return ref.model


def test_bf16_predictions_match_fp32_within_tolerance(batch):
    model = trained(batch)
    fp32 = learner_for(model).predict_proba(batch[0])
    bf16 = learner_for(model, precision="bf16").predict_proba(batch[0])
    assert bf16.dtype == np.float32
    np.testing.assert_allclose(bf16.sum(axis=1), 1.0, atol=1e-5)
    # bfloat16 keeps 8 bits of mantissa: probabilities agree to about 1e-2.
    assert np.abs(bf16 - fp32).max() < 0.05
    assert (bf16.argmax(axis=1) == fp32.argmax(axis=1)).mean() >= 0.9


@pytest.mark.parametrize("name", ["cnn", "resnet8"])
def test_channels_last_predictions_equal_fp32(batch, name):
    model = registry_net(name=name)
    ref = learner_for(model).predict_proba(batch[0])
    nhwc = learner_for(model, channels_last=True).predict_proba(batch[0])
    np.testing.assert_allclose(nhwc, ref, atol=1e-5)


def test_channels_last_training_equals_reference(batch):
    a, b = learner_for(registry_net()), learner_for(registry_net(), channels_last=True)
    a.fit(*batch, epochs=1)
    b.fit(*batch, epochs=1)
    targets = a.predict_proba(batch[0])
    a.distill(batch[0], targets, epochs=1, lam=1.0)
    b.distill(batch[0], targets, epochs=1, lam=1.0)
    for p, q in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True):
        torch.testing.assert_close(p.float(), q.float(), atol=1e-4, rtol=1e-4)


def test_bf16_training_runs_and_keeps_float32_weights(batch):
    lr = learner_for(registry_net(), precision="bf16")
    before = copy.deepcopy(lr.model.state_dict())
    metrics = lr.fit(*batch, epochs=1)
    assert np.isfinite(metrics["loss"])
    assert all(p.dtype == torch.float32 for p in lr.model.parameters())
    assert any(not torch.equal(before[k], v) for k, v in lr.model.state_dict().items())
    assert np.isfinite(lr.distill(batch[0], lr.predict_proba(batch[0]), lam=1.0)["kl"])


def test_unknown_precision_is_rejected():
    with pytest.raises(ValueError, match="fp32, bf16"):
        learner_for(registry_net(), precision="fp16")
    with pytest.raises(ConfigError, match=r"clients\.precision"):
        load_config(None, ["clients.precision=fp16"])
    cfg = load_config(None, ["clients.precision=bf16", "clients.channels_last=true"])
    assert (cfg.clients.precision, cfg.clients.channels_last) == ("bf16", True)


# The r_B and training options: consistency target, BatchNorm statistics in the neighbour
# pass, training augmentation, and the per-epoch distillation losses.


def images(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3, 8, 8)).astype(np.float32)
    targets = rng.dirichlet(np.ones(4), n).astype(np.float32)
    return x, targets


def bn_net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )


def test_detached_and_live_give_the_same_loss_but_different_training():
    clean, neighbour = torch.randn(5, 4), torch.randn(5, 4)
    assert torch.equal(
        consistency_loss(neighbour, clean, target="live"),
        consistency_loss(neighbour, clean, target="detached"),
    )
    x, targets = images()
    aug = Augmentation(max_shift=0.25, noise_std=0.5)
    live = TorchLearner(bn_net(), seed=0, augmentation=aug, consistency_target="live")
    det = TorchLearner(bn_net(), seed=0, augmentation=aug, consistency_target="detached")
    live.distill(x, targets, epochs=1, lam=5.0)
    det.distill(x, targets, epochs=1, lam=5.0)
    assert not torch.equal(params(live), params(det))


def test_unknown_consistency_target_is_a_clear_error():
    with pytest.raises(ValueError, match="allowed: live, detached"):
        consistency_loss(torch.zeros(2, 2), torch.zeros(2, 2), target="stop")
    with pytest.raises(ValueError, match="consistency_target"):
        TorchLearner(bn_net(), consistency_target="stop")
    with pytest.raises(ValueError, match="neighbour_bn"):
        TorchLearner(bn_net(), neighbour_bn="off")


def running_stats(learner):
    bn = learner.model[1]
    return bn.running_mean.clone(), bn.running_var.clone(), int(bn.num_batches_tracked)


def test_frozen_neighbour_bn_keeps_running_stats_to_the_clean_passes():
    # With lam = 0 only clean passes touch the statistics; with frozen BN and lam > 0 the
    # neighbour passes must leave them exactly as the clean passes alone would (the weights
    # differ, so compare one step: a single batch, statistics updated before the step).
    x, targets = images(n=16)
    aug = Augmentation(max_shift=0.25, noise_std=2.0)
    frozen = TorchLearner(bn_net(), seed=0, batch_size=16, augmentation=aug, neighbour_bn="frozen")
    update = TorchLearner(bn_net(), seed=0, batch_size=16, augmentation=aug, neighbour_bn="update")
    clean_only = TorchLearner(bn_net(), seed=0, batch_size=16, augmentation=aug)
    frozen.distill(x, targets, epochs=1, lam=5.0)
    update.distill(x, targets, epochs=1, lam=5.0)
    clean_only.distill(x, targets, epochs=1, lam=0.0)
    f, u, c = running_stats(frozen), running_stats(update), running_stats(clean_only)
    assert torch.equal(f[0], c[0]) and torch.equal(f[1], c[1]) and f[2] == c[2] == 1
    assert not torch.equal(u[0], c[0]) and u[2] == 2  # the old behaviour: two updates


def test_frozen_neighbour_bn_still_trains_through_the_neighbour_pass():
    x, targets = images()
    aug = Augmentation(max_shift=0.25, noise_std=0.5)
    a = TorchLearner(bn_net(), seed=0, augmentation=aug, neighbour_bn="frozen")
    b = TorchLearner(bn_net(), seed=0, augmentation=aug, neighbour_bn="frozen")
    out0 = a.distill(x, targets, epochs=1, lam=0.0)
    out5 = b.distill(x, targets, epochs=1, lam=5.0)
    assert out0["consistency"] == 0.0 and out5["consistency"] > 0
    assert not torch.equal(params(a), params(b))


def test_distill_reports_first_and_last_epoch_losses():
    x, targets = images()
    learner = TorchLearner(bn_net(), seed=0, distill_lr=1e-2)
    out = learner.distill(x, targets, epochs=4, lam=1.0)
    assert {"kl_first", "kl_last", "consistency_first", "consistency_last"} <= set(out)
    assert out["kl_last"] < out["kl_first"]  # it fits its targets
    assert min(out["kl_first"], out["kl_last"]) <= out["kl"] <= max(out["kl_first"], out["kl_last"])
    one = TorchLearner(bn_net(), seed=0).distill(x, targets, epochs=1)
    assert one["kl_first"] == one["kl_last"] == one["kl"]


def test_fit_uses_the_training_augmentation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3, 16, 16)).astype(np.float32)
    y = rng.integers(0, 4, 32)
    plain = TorchLearner(bn_net(), seed=0)
    augmented = TorchLearner(bn_net(), seed=0, train_augmentation=CropFlip(pad=2))
    again = TorchLearner(bn_net(), seed=0, train_augmentation=CropFlip(pad=2))
    for learner in (plain, augmented, again):
        learner.fit(x, y, epochs=1)
    assert not torch.equal(params(plain), params(augmented))
    assert torch.equal(params(augmented), params(again))
    assert augmented.clone(seed=1).train_augmentation == CropFlip(pad=2)


# Parameter access and training hooks: weights in and out, frozen parameters, BatchNorm
# recalibration (the parameter-sharing baselines drive them through their handlers).


def learner(seed=0, model="cnn"):
    net = build_model(model, in_channels=1, num_classes=3, image_size=8, seed=seed, width=0.25)
    return TorchLearner(net, seed=seed)


def data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, n)


def named_params(lrn):
    return {n: p.detach().clone() for n, p in lrn.model.named_parameters()}


def test_weights_round_trip_and_refuse_other_shapes():
    a, b = learner(0), learner(1)
    w = a.get_weights()
    # Parameters and BatchNorm statistics travel; the integer batch counters do not.
    assert all(v.dtype == np.float32 for v in w.values())
    assert any(n.endswith("running_var") for n in w)
    assert not any(n.endswith("num_batches_tracked") for n in w)
    b.set_weights(w)
    for n, v in b.get_weights().items():
        np.testing.assert_array_equal(v, w[n])
    with pytest.raises(ValueError, match="missing"):
        b.set_weights({k: v for k, v in list(w.items())[1:]})
    other = learner(0, model="mlp").get_weights()
    with pytest.raises(ValueError):
        b.set_weights(other)


def test_frozen_head_or_body_does_not_move():
    x, y = data()
    for freeze, moves_head in (("head", False), ("body", True)):
        lrn = learner()
        head = set(lrn.head_names())
        assert head == {"classifier.weight", "classifier.bias"}
        before = named_params(lrn)
        lrn.fit(x, y, epochs=1, frozen=frozen_parameters(lrn, freeze))
        after = named_params(lrn)
        for n in before:
            moved = not torch.equal(before[n], after[n])
            assert moved == ((n in head) == moves_head), (freeze, n)
        assert all(p.requires_grad for p in lrn.model.parameters())  # restored


def test_plain_fit_is_unchanged_by_the_new_options_at_their_defaults():
    x, y = data()
    a, b = learner(), learner()
    a.fit(x, y, epochs=2)
    b.fit(x, y, epochs=2, frozen=frozen_parameters(b, ""), extra_losses=[])
    for n, v in a.get_weights().items():
        np.testing.assert_array_equal(v, b.get_weights()[n])


def test_batchnorm_recalibration_recomputes_statistics_for_the_current_weights():
    x, _ = data()
    lrn = learner()
    bn = lrn.model.features[1]
    bn.running_mean.fill_(5.0)
    bn.running_var.fill_(100.0)
    before = named_params(lrn)
    lrn.recalibrate_batchnorm(x)
    with torch.no_grad():
        out = lrn.model.features[0](torch.from_numpy(x))
    torch.testing.assert_close(bn.running_mean, out.mean(dim=(0, 2, 3)))
    torch.testing.assert_close(bn.running_var, out.var(dim=(0, 2, 3), unbiased=True))
    assert bn.momentum == 0.1  # restored
    for n, p in lrn.model.named_parameters():  # no training
        assert torch.equal(p, before[n])
