"""COSMOS's server models are injected: `simulate` (and the experiment layer) build the factory
from the algorithm's server_* settings; the algorithm itself builds no model."""

from __future__ import annotations

import numpy as np

from cosmosfl.algorithms import Cosmos, FedMD
from cosmosfl.experiment.server_models import provide_server_learner, torch_server_learner
from cosmosfl.learners.torch import TorchLearner


def test_the_factory_follows_the_server_settings() -> None:
    algo = Cosmos(server_model="mlp", server_width=0.5, server_batch_size=16, server_lr=3e-3)
    provide_server_learner(algo, "cpu")
    h = algo.server_learner((1, 8, 8), 10, 7)
    assert isinstance(h, TorchLearner)
    assert (h.batch_size, h.distill_lr, str(h.device)) == (16, 3e-3, "cpu")
    # The same seed gives the same initial model as the factory built by hand.
    by_hand = torch_server_learner("mlp", width=0.5, batch_size=16, distill_lr=3e-3)(
        (1, 8, 8), 10, 7
    )
    x = np.random.default_rng(0).normal(size=(5, 1, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(h.predict_proba(x), by_hand.predict_proba(x))


def test_a_factory_of_ones_own_and_algorithms_without_server_models_are_left_alone() -> None:
    def mine(shape, m, seed):  # type: ignore[no-untyped-def]
        raise AssertionError("not called here")

    algo = Cosmos(server_model="mlp", server_learner=mine)
    provide_server_learner(algo, "cpu")
    assert algo.server_learner is mine
    fedmd = FedMD()
    provide_server_learner(fedmd, "cpu")
    assert not hasattr(fedmd, "server_learner")


def test_default_head_init_starts_server_models_near_uniform():
    import torch

    from cosmosfl.experiment.server_models import torch_server_learner

    x = np.random.default_rng(0).normal(size=(64, 3, 32, 32)).astype(np.float32)
    spread = {}
    for init in ("kaiming", "default"):
        h = torch_server_learner("resnet18", head_init=init)((3, 32, 32), 10, 5)
        again = torch_server_learner("resnet18", head_init=init)((3, 32, 32), 10, 5)
        assert all(
            torch.equal(a, b)
            for a, b in zip(h.model.parameters(), again.model.parameters(), strict=True)
        )
        spread[init] = h.predict_proba(x).max(axis=1).mean()
    assert spread["default"] < 0.5 < spread["kaiming"]
