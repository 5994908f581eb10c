"""The Flower engine's logic without Ray: codec, federation and ClientApp over a loopback Grid.

These tests exercise the real ServerApp-side federation and the real ClientApp (message
batching, validation, byte counting, state in context.state, faults); the test against
Flower's own simulation runtime is tests/apps/flower/test_simulation_runtime.py.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.apps.flower.client_app import make_client_app
from cosmosfl.apps.flower.settings import AppSettings
from cosmosfl.core import protocol as P
from cosmosfl.engines.flower import codec
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


def test_codec_round_trip_keeps_tasks_config_types_and_arrays() -> None:
    targets = np.random.default_rng(0).dirichlet(np.ones(3), size=5).astype(np.float32)
    batch = codec.Batch(
        [
            P.Message(P.TRAIN_LOCAL, {"epochs": 2}),
            P.Message(P.DISTILL, {"lam": 5.0, "client_weights": "uniform"}, {"targets": targets}),
            codec.ServerEval({"name": "mlp", "width": 1.0}, {"w": np.arange(3, dtype=np.int64)}),
        ],
        round_num=7,
    )
    back = codec.decode_batch(codec.encode_batch(batch))
    assert back.round_num == 7
    first, second, third = back.items
    assert first == P.Message(P.TRAIN_LOCAL, {"epochs": 2})
    assert isinstance(first.config["epochs"], int)
    assert second.task == P.DISTILL and second.config["lam"] == 5.0
    assert second.arrays["targets"].dtype == np.float32
    np.testing.assert_array_equal(second.arrays["targets"], targets)
    assert isinstance(third, codec.ServerEval) and third.arrays["w"].dtype == np.int64

    replies = [
        codec.ItemReply(codec.PROTOCOL, P.Reply(P.PREDICT_PUBLIC, arrays={"probs": targets})),
        codec.ItemReply(codec.PROTOCOL, P.Reply(P.DISTILL, error="boom", error_kind="exception")),
    ]
    pid, got = codec.decode_replies(codec.encode_replies(3, replies))
    assert pid == 3
    np.testing.assert_array_equal(got[0].reply.arrays["probs"], targets)
    assert got[1].reply.error == "boom" and got[1].reply.error_kind == "exception"


def test_discovery_maps_partition_ids_not_node_ids() -> None:
    cfg = load_config(None, SMALL)
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)
    assert fed.client_ids == [0, 1, 2, 3]
    assert fed.unconnected == []


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


class _Probe(Algorithm):
    """Sends one metric-only and one array-returning request per round, reporting replies."""

    name = "probe"

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        record = RoundRecord()
        trained = fed.send({c: P.Message(P.TRAIN_LOCAL, {"epochs": 1}) for c in fed.client_ids})
        probs = fed.send({c: P.Message(P.PREDICT_PUBLIC) for c in fed.client_ids})
        record.info["trained"] = sorted(trained)
        record.info["predicted"] = sorted(probs)
        return record


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


def test_a_failing_a_silent_and_an_offline_client_are_recorded_and_the_run_goes_on() -> None:
    cfg = load_config(None, SMALL)

    def hook(client, item):  # type: ignore[no-untyped-def]
        if client.id == 1 and isinstance(item, P.Message) and item.task == P.TRAIN_LOCAL:
            raise_in_fit = grid.round == 2

            def fit(*args, **kwargs):  # type: ignore[no-untyped-def]
                raise RuntimeError("disk full")

            if raise_in_fit:
                client.learner.fit = fit

    grid = LoopbackGrid(make_client_app(settings_for(cfg), hook=hook), 4)
    grid.drop = {2: {2}}  # client 2's replies are lost in round 2 (a timeout)
    grid.offline_from = {3: 3}  # client 3's SuperNode is gone from round 3
    fed = federation(cfg, grid)
    probe = _Probe()
    records = []
    for t in (1, 2, 3):
        grid.round = t
        records.append(fed.run_round(probe, t, 3))

    first, second, third = records
    assert first["trained"] == first["predicted"] == [0, 1, 2, 3]
    assert first["missing"] == [] and first["rejected"] == []

    assert second["trained"] == [0, 3]  # 1 raised, 2 never answered
    assert second["predicted"] == [0, 1, 3]  # the raise only cost client 1 that step
    assert second["rejected"] == [
        {
            "client": 1,
            "task": P.TRAIN_LOCAL,
            "reason": "client reported an error: RuntimeError: disk full",
        }
    ]
    missing = {(m["client"], m["task"]) for m in second["missing"]}
    assert missing == {(2, P.TRAIN_LOCAL), (2, P.PREDICT_PUBLIC)}
    assert all("no reply" in m["reason"] for m in second["missing"])

    assert third["predicted"] == [0, 1, 2]  # client 2 is back; client 3 is offline
    assert {m["client"] for m in third["missing"]} == {3}
    assert all(m["reason"] == "SuperNode offline" for m in third["missing"])
    assert third["bytes_up"]["3"] == 0


def test_a_clientapp_that_crashes_is_missing_with_flowers_error() -> None:
    cfg = load_config(None, SMALL)

    def hook(client, item):  # type: ignore[no-untyped-def]
        if client.id == 0:
            raise MemoryError("out of memory")

    grid = LoopbackGrid(make_client_app(settings_for(cfg), hook=hook), 4)
    fed = federation(cfg, grid)
    record = fed.run_round(_Probe(), 1, 1)
    assert record["predicted"] == [1, 2, 3]
    assert {m["client"] for m in record["missing"]} == {0}
    assert "out of memory" in record["missing"][0]["reason"]


def test_every_client_failing_stops_the_run_with_the_first_error() -> None:
    cfg = load_config(None, SMALL)
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)
    grid.offline_from = {i: 0 for i in range(4)}
    with pytest.raises(
        RuntimeError, match=r"every client failed task 'train_local'.*SuperNode offline"
    ):
        fed.run_round(_Probe(), 1, 1)


def test_learner_state_survives_in_context_state_not_in_the_process() -> None:
    """Deployment starts a process per message: the state must come from context.state."""
    from cosmosfl.apps.flower import client_app

    cfg = load_config(None, SMALL)
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)
    fed.send({0: P.Message(P.TRAIN_LOCAL, {"epochs": 1})})
    trained = dict(fed.send({0: P.Message(P.PREDICT_PUBLIC)}))[0].arrays["probs"]
    (
        client,
        initial,
    ) = next(  # the process cache is keyed by (run id, config, partition)
        v for k, v in client_app._CLIENTS.items() if k[1:] == (dump_config(cfg), 0)
    )
    client.set_state(initial)  # the process's copy forgets the training: only context.state knows
    again = dict(fed.send({0: P.Message(P.PREDICT_PUBLIC)}))[0].arrays["probs"]
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
    replies = dict(fed.send({c: P.Message(P.PREDICT_PUBLIC) for c in fed.client_ids}))
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
