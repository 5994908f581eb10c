"""Hostile replies reaching the ServerApp: whatever a SuperNode sends back, the federation
either accepts a valid reply or records the client as rejected (or missing) with a reason;
it never raises, a rejected reply never reaches the algorithm, and the round record stays
strict JSON. Exercised through a scripted Grid: client 0 is hostile, client 1 honest."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from flwr.app import ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.core import protocol
from cosmosfl.engines.flower import codec
from cosmosfl.engines.flower.federation import FlowerFederation

from .hostile import UNPICKLED, mutated

N, M = 4, 3
NODE_BASE = 1000
PROBS = np.array([[0.5, 0.25, 0.25]] * N, np.float32)
# What the honest client answers to the probe's two steps (train_local, then predict_public).
HONEST = codec.encode_replies(
    0,
    [
        codec.ItemReply(
            codec.PROTOCOL, protocol.Reply(protocol.TRAIN_LOCAL, metrics={"loss": 0.5}), 0.25
        ),
        codec.ItemReply(
            codec.PROTOCOL, protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": PROBS})
        ),
    ],
)


class ScriptedGrid(Grid):
    """Two SuperNodes in this process; node 1000 answers `hostile`, node 1001 honestly."""

    def __init__(self, hostile: RecordDict) -> None:
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
        self.hostile = hostile

    def set_run(self, run):  # type: ignore[no-untyped-def]
        self._run = run

    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # type: ignore[no-untyped-def]
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> list[int]:
        return [NODE_BASE, NODE_BASE + 1]

    def push_messages(self, messages):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def pull_messages(self, message_ids):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def send_and_receive(self, messages, *, timeout=None):  # type: ignore[no-untyped-def]
        out = []
        for msg in messages:
            pid = msg.metadata.dst_node_id - NODE_BASE
            batch = codec.decode_batch(msg.content)
            if not batch.items:  # discovery
                content = codec.encode_replies(pid, [])
            elif pid == 0:
                content = self.hostile
            else:
                content = codec.encode_replies(pid, [_honest(item) for item in batch.items])
            out.append(Message(content, reply_to=msg))
        return out


def _honest(item: codec.Item) -> codec.ItemReply:
    if isinstance(item, codec.ServerEval):
        return codec.ItemReply(
            codec.SERVER_EVAL, protocol.Reply(protocol.EVALUATE, metrics={"accuracy": 0.5})
        )
    if item.task == protocol.PREDICT_PUBLIC:
        return codec.ItemReply(
            codec.PROTOCOL, protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": PROBS})
        )
    return codec.ItemReply(codec.PROTOCOL, protocol.Reply(item.task, metrics={"loss": 0.5}), 0.25)


class Probe(Algorithm):
    """Its server state is what it received: the soft labels each client sent."""

    name = "probe"

    def __init__(self) -> None:
        self.received: dict[int, np.ndarray] = {}

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        fed.send({c: protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 1}) for c in fed.client_ids})
        replies = fed.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in fed.client_ids})
        self.received.update({c: r.arrays["probs"] for c, r in replies.items()})
        return RoundRecord()


def _run(hostile: RecordDict) -> tuple[Probe, dict[str, Any]]:
    fed = FlowerFederation(
        ScriptedGrid(hostile),
        np.zeros((N, 2), np.float32),
        M,
        expected_clients=[0, 1],
        discovery_timeout=5.0,
    )
    assert fed.connect(poll_seconds=0.0) == [0, 1]
    probe = Probe()
    return probe, fed.run_round(probe, 1, 1)


def _valid_probs(a: np.ndarray) -> bool:
    v = a.astype(np.float64)
    return bool(
        a.shape == (N, M)
        and a.dtype.name in ("float32", "float64", "float16")
        and np.isfinite(v).all()
        and (v >= 0).all()
        and np.allclose(v.sum(axis=1), 1, rtol=0, atol=1e-3)
    )


@given(hostile=mutated(HONEST, N, M))
def test_a_hostile_reply_is_accepted_if_valid_else_recorded_and_never_used(
    hostile: RecordDict,
) -> None:
    probe, record = _run(hostile)
    json.dumps(record, allow_nan=False)  # the record a run writes stays strict JSON
    np.testing.assert_array_equal(probe.received[1], PROBS)  # the honest client is unharmed
    refused = [e for e in record["rejected"] + record["missing"] if e["client"] == 0]
    assert all(isinstance(e["reason"], str) and e["reason"] for e in refused)
    if 0 in probe.received:
        assert _valid_probs(probe.received[0])
        assert not any(e["task"] == protocol.PREDICT_PUBLIC for e in refused)
    else:
        assert any(e["task"] == protocol.PREDICT_PUBLIC for e in refused)
    assert all(s >= 0 for s in record["client_seconds"].get(protocol.TRAIN_LOCAL, {}).values())
    assert UNPICKLED == []


def test_an_undecodable_reply_rejects_every_item_it_answers() -> None:
    """Regression: a reply whose records did not decode raised out of `flush` (a KeyError for
    a missing record) and stopped the ServerApp."""
    hostile = RecordDict()
    for name, record in HONEST.items():
        if name != "1.head":
            hostile[name] = record
    probe, record = _run(hostile)
    assert 0 not in probe.received
    assert [(e["client"], e["task"]) for e in record["rejected"]] == [
        (0, protocol.TRAIN_LOCAL),
        (0, protocol.PREDICT_PUBLIC),
    ]
    assert all(
        "malformed reply: config record '1.head' is missing" in e["reason"]
        for e in record["rejected"]
    )


@given(seconds=st.sampled_from([float("nan"), float("inf"), -1.0]))
def test_reported_client_seconds_that_are_not_a_duration_are_refused(seconds: float) -> None:
    """Regression: NaN seconds went into the round record's client_seconds (invalid JSON)."""
    hostile = RecordDict()
    for name, record in HONEST.items():
        hostile[name] = record
    hostile["0.head"] = ConfigRecord(
        {"kind": codec.PROTOCOL, "task": protocol.TRAIN_LOCAL, "seconds": seconds}
    )
    probe, record = _run(hostile)
    assert 0 not in probe.received
    assert "seconds" in record["rejected"][0]["reason"]
    json.dumps(record, allow_nan=False)


class ServerEvalProbe(Algorithm):
    """Measures one registry server model on both clients; keeps the accuracies it was sent."""

    name = "server-eval-probe"

    def __init__(self) -> None:
        from cosmosfl.learners.torch import TorchLearner
        from cosmosfl.models.registry import build_model

        net = build_model("mlp", in_channels=1, num_classes=M, image_size=8, seed=0)
        self.model = TorchLearner(net, num_classes=M)
        self.received: dict[int, dict[str, float]] = {}

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        measured = fed.evaluate_server_models({c: self.model for c in fed.client_ids})
        self.received.update(dict(measured.items()))
        return RoundRecord()


@pytest.mark.parametrize(
    "accuracy",
    [float("nan"), float("inf"), pytest.param(10**400, id="int-beyond-float")],
)
def test_a_server_evaluation_with_metrics_that_are_not_numbers_is_rejected(accuracy) -> None:  # type: ignore[no-untyped-def]
    """Regression: a server-model evaluation reply was accepted with whatever metrics it
    carried (NaN, inf, an int too large for a float) and reported as that client's h_π(i)."""
    hostile = codec.encode_replies(
        0,
        [
            codec.ItemReply(
                codec.SERVER_EVAL, protocol.Reply(protocol.EVALUATE, metrics={"accuracy": 0.5})
            )
        ],
    )
    hostile["0.metrics"] = MetricRecord({"accuracy": accuracy})
    fed = FlowerFederation(
        ScriptedGrid(hostile), np.zeros((N, 2), np.float32), M, expected_clients=[0, 1]
    )
    fed.connect(poll_seconds=0.0)
    probe = ServerEvalProbe()
    record = fed.run_round(probe, 1, 1)
    assert probe.received == {1: {"accuracy": 0.5}}
    assert record["rejected"][0]["client"] == 0
    assert "not finite numbers" in record["rejected"][0]["reason"]
