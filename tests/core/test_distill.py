"""The consistency loss (core/distill.py): no gradient through a detached target, finite
gradients for confident models."""

import pytest
import torch

from cosmosfl.core.distill import consistency_loss


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
