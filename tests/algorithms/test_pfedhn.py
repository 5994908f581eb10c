"""pFedHN's server step: the line-searched fit of generated weights onto trained weights."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from cosmosfl.algorithms.pfedhn import HyperNetwork, fit_step


def _setup(seed: int, scale: float) -> tuple[HyperNetwork, list[dict[str, torch.Tensor]]]:
    rng = np.random.default_rng(seed)
    initial = {
        "conv.weight": rng.normal(0, 0.1, (4, 3, 3, 3)).astype(np.float32),
        "bn.weight": np.ones(4, np.float32),
        "fc.bias": np.zeros(10, np.float32),
    }
    torch.manual_seed(seed)
    hn = HyperNetwork(3, initial, embed_dim=2, hidden_dim=16, hidden_layers=3)
    with torch.no_grad():  # a large hypernetwork scale: where a fixed learning rate diverged
        for head in hn.heads:
            head.weight.mul_(scale)
    targets = []
    for index in range(3):
        with torch.no_grad():
            theta = hn(index)
        targets.append({n: t + 0.5 * torch.randn_like(t) for n, t in theta.items()})
    return hn, targets


def _distance(hn: HyperNetwork, targets: list[dict[str, torch.Tensor]]) -> float:
    with torch.no_grad():
        return sum(float(((hn(i)[n] - t[n]) ** 2).sum()) for i, t in enumerate(targets) for n in t)


def test_fit_step_moves_generated_weights_toward_trained_ones() -> None:
    hn, targets = _setup(0, 1.0)
    before = _distance(hn, targets)
    info = fit_step(hn, [0, 1, 2], targets)
    assert info["step"] > 0
    assert np.isclose(info["regression_loss"], 0.5 * before, rtol=1e-4)
    assert _distance(hn, targets) < before


def test_fit_step_stays_stable_when_the_hypernetwork_scale_is_large() -> None:
    # The step of a fixed learning rate grows with the hypernetwork's scale (the cause of the
    # CIFAR-10 collapse); the line-searched step stays a descent step at any scale.
    hn, targets = _setup(1, 300.0)
    distances = [_distance(hn, targets)]
    for _ in range(5):
        fit_step(hn, [0, 1, 2], targets)
        distances.append(_distance(hn, targets))
    assert all(b < a for a, b in itertools.pairwise(distances))
    assert distances[-1] < 0.9 * distances[0]
