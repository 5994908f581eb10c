"""COSMOS's server models are injected: a loaded config carries the value its algorithm's
server_* settings describe (a run sets only its data's kind), `simulate` makes it from the
algorithm's settings by the same rule; the algorithm itself builds no model."""

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


SERVER_SETTINGS = {
    "name": "cosmos",
    "server_model": "mlp",
    "server_width": 0.5,
    "server_batch_size": 16,
    "server_lr": 3e-3,
    "server_head_init": "default",
}


def test_a_loaded_config_carries_the_server_models_its_settings_describe() -> None:
    import torch

    from cosmosfl.experiment.config import load_config
    from cosmosfl.models.init import reset_head
    from cosmosfl.models.registry import build_model_for

    cfg = load_config(
        {"algorithm": SERVER_SETTINGS, "clients": {"eval_batch_size": 77, "precision": "bf16"}}
    )
    h = cfg.server_models((1, 8, 8), 10, 7)
    assert isinstance(h, TorchLearner)
    # The registry's model for these settings and seed, with the head the settings ask for.
    net = build_model_for("mlp", (1, 8, 8), num_classes=10, width=0.5, seed=7)
    reset_head(net, 7)
    assert type(h.model) is type(net)
    assert all(
        torch.equal(a, b) for a, b in zip(h.model.parameters(), net.parameters(), strict=True)
    )
    assert (h.batch_size, h.distill_lr, str(h.device)) == (16, 3e-3, cfg.device)
    assert (h.eval_batch_size, h.precision) == (77, "bf16")  # shared with the clients'


def test_the_server_models_pickle_and_follow_a_replaced_config() -> None:
    import dataclasses
    import pickle

    from cosmosfl.experiment.config import load_config

    cfg = load_config({"algorithm": SERVER_SETTINGS})
    again = pickle.loads(pickle.dumps(cfg.server_models))  # as worker processes receive it
    assert again == cfg.server_models
    x = np.random.default_rng(0).normal(size=(5, 1, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(
        again((1, 8, 8), 10, 3).predict_proba(x),
        cfg.server_models((1, 8, 8), 10, 3).predict_proba(x),
    )
    # Derived from the settings, so a changed config has its own (never a stale copy).
    changed = dataclasses.replace(cfg, clients=dataclasses.replace(cfg.clients, precision="bf16"))
    assert changed.server_models.learner_options["precision"] == "bf16"
    assert cfg.server_models.learner_options["precision"] == cfg.clients.precision
    assert load_config({"algorithm": {"name": "local"}}).server_models is None


def test_a_run_takes_the_configs_server_models_with_its_datas_kind(monkeypatch) -> None:
    import dataclasses

    from cosmosfl.experiment import build
    from cosmosfl.experiment.config import load_config

    def as_photos(*args, **kwargs):  # type: ignore[no-untyped-def]
        return dataclasses.replace(load_dataset(*args, **kwargs), natural=True)

    load_dataset = build.load_dataset
    monkeypatch.setattr(build, "load_dataset", as_photos)
    cfg = load_config("configs/default.yaml")
    exp = build.build_experiment(cfg)
    assert cfg.server_models is not None and not cfg.server_models.natural
    assert exp.algorithm.server_learner == dataclasses.replace(cfg.server_models, natural=True)
    assert cfg.algorithm.built.server_learner is None  # the config's own stays as validated
