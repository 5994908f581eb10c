"""The r_B and training options of TorchLearner: consistency target, BatchNorm statistics in the
neighbour pass, training augmentation, and the per-epoch distillation losses."""

import numpy as np
import pytest
import torch
from torch import nn

from cosmosfl.core.distill import consistency_loss
from cosmosfl.data.augment import Augmentation, CropFlip, train_augmentation_for
from cosmosfl.learners import TorchLearner


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


def params(learner):
    return torch.cat([p.detach().flatten().clone() for p in learner.model.parameters()])


def test_detached_target_gives_no_gradient_through_the_clean_branch():
    clean = torch.randn(5, 4, requires_grad=True)
    neighbour = torch.randn(5, 4, requires_grad=True)
    consistency_loss(neighbour, clean, target="detached").backward()
    assert clean.grad is None or clean.grad.abs().sum() == 0
    assert neighbour.grad.abs().sum() > 0
    live_clean = clean.detach().clone().requires_grad_(True)
    consistency_loss(neighbour.detach(), live_clean, target="live").backward()
    assert live_clean.grad.abs().sum() > 0


@pytest.mark.parametrize("target", ["live", "detached"])
def test_confident_models_get_finite_consistency_gradients(target):
    # Logit gaps beyond ~104 make float32 softmax exactly 0; through softmax the live target's
    # gradient was 0·(-inf) = NaN there (a 2-class client on Fashion-MNIST died of it).
    clean = torch.tensor([[90.0, -43.0, 0.0], [5.0, 1.0, -200.0]], requires_grad=True)
    neighbour = torch.tensor([[80.0, -40.0, 3.0], [4.0, 2.0, -190.0]], requires_grad=True)
    assert torch.softmax(clean, 1).eq(0).any()  # the underflow really happens
    loss = consistency_loss(neighbour, clean, target=target)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(neighbour.grad).all()
    assert clean.grad is None or torch.isfinite(clean.grad).all()
    # Still KL(softmax(clean) ‖ softmax(neighbour)), computed in float64 as a reference.
    p, q = torch.softmax(clean.double(), 1), torch.log_softmax(neighbour.double(), 1)
    expected = (torch.special.xlogy(p, p) - p * q).sum(1).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


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


def test_crop_flip_shifts_whole_pixels_and_flips():
    g = torch.Generator().manual_seed(0)
    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).reshape(2, 1, 6, 6) + 1
    out = CropFlip(pad=2, hflip=False)(x, g)
    assert out.shape == x.shape
    for i in range(2):  # every output is x shifted by (dy, dx) with zeros where it came in
        found = False
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                shifted = torch.zeros_like(x[i, 0])
                src = x[i, 0, max(dy, 0) : 6 + min(dy, 0), max(dx, 0) : 6 + min(dx, 0)]
                shifted[max(-dy, 0) : 6 + min(-dy, 0), max(-dx, 0) : 6 + min(-dx, 0)] = src
                found |= torch.equal(out[i, 0], shifted)
        assert found
    flipped = CropFlip(pad=0, hflip=True)(x.repeat(16, 1, 1, 1), torch.Generator().manual_seed(1))
    kinds = {torch.equal(o, x[0]) or torch.equal(o, x[1]) for o in flipped}
    assert kinds == {True, False}  # some flipped, some not
    assert torch.equal(CropFlip(pad=0, hflip=False)(x, g), x)


def test_crop_flip_is_seeded():
    x = torch.randn(8, 3, 16, 16)
    a = CropFlip()(x, torch.Generator().manual_seed(3))
    b = CropFlip()(x, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_train_augmentation_only_for_images_of_16_px_and_more():
    assert train_augmentation_for((1, 8, 8), natural=False) is None
    assert train_augmentation_for((10,), natural=False) is None
    assert train_augmentation_for((3, 32, 32), natural=True) == CropFlip(pad=4, hflip=True)
    assert train_augmentation_for((1, 28, 28), natural=False) == CropFlip(pad=4, hflip=False)


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
