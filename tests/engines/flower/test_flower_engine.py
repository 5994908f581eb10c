"""The Flower engine's logic without Ray: federation and ClientApp over a loopback Grid.

These tests exercise the real ServerApp-side federation and the real ClientApp together
(message batching, validation, byte counting, state in context.state); the test against
Flower's own simulation runtime is tests/apps/flower/test_simulation_runtime.py. The codec's
and the federation's own tests: test_codec.py, test_federation.py. SMALL, settings_for and
federation, defined here, are shared by the Flower tests.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.client_app import make_client_app
from cosmosfl.apps.flower.settings import AppSettings
from cosmosfl.core import protocol
from cosmosfl.engines.flower.federation import FlowerFederation
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import dump_config, load_config
from cosmosfl.experiment.runner import run_experiment

from .loopback import LoopbackGrid

SMALL = [
    "rounds=2",
    "threads=1",
    "data.num_clients=4",
    "data.num_groups=2",
    "clients.models=[mlp,mlp,cnn,mlp]",
    "algorithm.target_clusters=2",
    "algorithm.pretrain_epochs=2",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=2",
    "algorithm.distill_epochs=1",
    "algorithm.server_model=mlp",
]


def settings_for(cfg, out: str = "") -> AppSettings:  # type: ignore[no-untyped-def]
    return AppSettings(dump_config(cfg), out, True, 30.0, 5.0)


def federation(cfg, grid: LoopbackGrid) -> FlowerFederation:  # type: ignore[no-untyped-def]
    exp = build_experiment(cfg)
    fed = FlowerFederation(
        grid,
        exp.public_x,
        exp.dataset.num_classes,
        expected_clients=[c.id for c in exp.clients],
        seed=cfg.seed,
        discovery_timeout=5.0,
    )
    fed.connect(poll_seconds=0.01)
    return fed


SELECT = ["data.validation_fraction=0.25", "algorithm.select_on_validation=true"]


@pytest.mark.parametrize("extra", [[], SELECT], ids=["paper", "select_on_validation"])
def test_loopback_cosmos_matches_the_in_process_engine(tmp_path, extra) -> None:  # type: ignore[no-untyped-def]
    """Same seed and config: same clusters and per-client accuracies, through the real
    ClientApp with its state kept in context.state (the learner is rebuilt each message).
    With model selection, the validation measurements travel the same way (deferred)."""
    cfg = load_config(None, SMALL + extra)
    sim = run_experiment(cfg, tmp_path / "sim", progress=False)
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)
    algorithm = build_experiment(cfg).algorithm
    records = [fed.run_round(algorithm, t, 2) for t in (1, 2)]  # type: ignore[arg-type]
    for ours, theirs in zip(records, sim.records, strict=True):
        assert ours["clusters"] == theirs["clusters"]
        assert ours["accuracy"].keys() == theirs["accuracy"].keys()
        for model in theirs["accuracy"]:
            assert ours["accuracy"][model] == pytest.approx(theirs["accuracy"][model], abs=1e-9)
        assert ours["bytes_up"] == theirs["bytes_up"]
        assert ours["bytes_down"] == theirs["bytes_down"]
        assert ours["round_trips"] == 2  # metric-only requests ride along with others
        assert ("selected" in ours["accuracy"]) == bool(extra)
        assert ours.get("selection") == theirs.get("selection")
        assert (ours.get("selection") is not None) == bool(extra)
        assert ours["missing"] == [] and ours["rejected"] == []


BASELINE = [*SMALL[:4], "clients.models={mlp: 1.0}"]
EXTRA = {"fedbabu": ["algorithm.finetune_epochs=1"], "pfedck": ["algorithm.num_clusters=2"]}


@pytest.mark.parametrize(
    "name", ["fedavg", "fedprox", "ditto", "fedbabu", "pfedck", "pfedhn", "fedselect", "fedct"]
)
def test_loopback_baselines_serve_their_own_client_handlers(tmp_path, name) -> None:  # type: ignore[no-untyped-def]
    """The ClientApp gives each client the handlers of the run's algorithm (model slots,
    proximal and distillation terms, frozen parts, hard labels): the same records as in
    process."""
    epochs = ["algorithm.pretrain_epochs=1", "algorithm.local_epochs=1"]
    cfg = load_config(None, [*BASELINE, f"algorithm.name={name}", *epochs, *EXTRA.get(name, [])])
    sim = run_experiment(cfg, tmp_path / "sim", progress=False)
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)
    algorithm = build_experiment(cfg).algorithm
    records = [fed.run_round(algorithm, t, 2) for t in (1, 2)]  # type: ignore[arg-type]
    for ours, theirs in zip(records, sim.records, strict=True):
        assert ours["accuracy"].keys() == theirs["accuracy"].keys()
        for model in theirs["accuracy"]:
            assert ours["accuracy"][model] == pytest.approx(theirs["accuracy"][model], abs=1e-9)
        assert ours["bytes_up"] == theirs["bytes_up"]
        assert ours["bytes_down"] == theirs["bytes_down"]
        assert ours["missing"] == [] and ours["rejected"] == []


def test_learner_state_survives_in_context_state_not_in_the_process() -> None:
    """Deployment starts a process per message: the state must come from context.state."""
    from cosmosfl.apps.flower import client_app

    cfg = load_config(None, SMALL)
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)
    fed.send({0: protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 1})})
    trained = dict(fed.send({0: protocol.Message(protocol.PREDICT_PUBLIC)}))[0].arrays["probs"]
    (
        client,
        initial,
    ) = next(  # the process cache is keyed by (run id, config, partition)
        v for k, v in client_app._CLIENTS.items() if k[1:] == (dump_config(cfg), 0)
    )
    client.set_state(initial)  # the process's copy forgets the training: only context.state knows
    again = dict(fed.send({0: protocol.Message(protocol.PREDICT_PUBLIC)}))[0].arrays["probs"]
    np.testing.assert_array_equal(again, trained)


def test_client_factory_serves_a_user_built_client() -> None:
    cfg = load_config(None, SMALL)
    exp = build_experiment(cfg)
    for c in exp.clients:
        c.public_x = exp.public_x

    def factory(context):  # type: ignore[no-untyped-def]
        return exp.clients[int(context.node_config["partition-id"])]

    grid = LoopbackGrid(make_client_app(settings_for(cfg), client_factory=factory), 4)
    fed = federation(cfg, grid)
    replies = dict(fed.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in fed.client_ids}))
    for cid, reply in replies.items():
        expected = exp.clients[cid].learner.predict_proba(exp.public_x)
        np.testing.assert_array_equal(reply.arrays["probs"], expected)


def test_a_server_model_outside_the_registry_is_not_measured_but_the_round_runs() -> None:
    """h_π(i) needs the cluster model rebuilt on the client: unknown architectures are
    reported as unmeasured (empty), never guessed."""
    import dataclasses

    import torch

    from cosmosfl.learners.torch import TorchLearner

    cfg = load_config(None, [*SMALL, "rounds=1"])
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)

    def custom(shape, num_classes, seed):  # type: ignore[no-untyped-def]
        net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, num_classes))
        return TorchLearner(net, num_classes=num_classes, seed=seed)

    algorithm = dataclasses.replace(build_experiment(cfg).algorithm, server_learner=custom)
    record = fed.run_round(algorithm, 1, 1)
    assert record["accuracy"]["cluster_model"] == {}
    assert set(record["accuracy"]["client_model"]) == {"0", "1", "2", "3"}
    assert all(v == 0 for v in record["eval_bytes_down"].values())
