"""Batched (vmap-stacked) training of same-architecture models (learners/batched.py) against
per-model training."""

import copy

import pytest
import torch
import torch.nn.functional as F

from cosmosfl.learners.batched import StackedModels

from .test_torch import registry_net as net


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
