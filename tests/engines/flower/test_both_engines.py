"""One set of rules, two engines: the participation rule, injected faults, the payload limit and
the round record come from `BaseFederation` (engines/base.py), so each rule is written once
below and checked against the in-process engine and the Flower engine (its federation over
the loopback Grid, the clients served in this process)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines.base import BaseFederation, ParticipationError
from cosmosfl.engines.faults import LATE
from cosmosfl.engines.flower import flower_available
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.simulation import InProcessEngine
from cosmosfl.learners.base import Learner

ENGINES = [
    "in-process",
    pytest.param(
        "flower",
        marks=pytest.mark.skipif(not flower_available(), reason="needs `pip install .[flower]`"),
    ),
]
PUBLIC = np.zeros((5, 1), np.float32)
FLOWER_ONLY = {"eval_bytes_down", "client_seconds", "round_trips", "missing"}


class Fixed(Learner):
    num_classes = 2

    def __init__(self) -> None:
        self.fits = 0

    def fit(self, x, y, *, epochs=1):  # type: ignore[no-untyped-def]
        self.fits += 1
        return {"loss": 0.5}

    def predict_proba(self, x):  # type: ignore[no-untyped-def]
        return np.tile(np.array([[0.25, 0.75]], np.float32), (len(x), 1))

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):  # type: ignore[no-untyped-def]
        return {}


def make_clients(n: int) -> list[Client]:
    x = np.zeros((4, 1), np.float32)
    y = np.array([0, 1, 0, 1])
    return [Client(i, Fixed(), (x, y), (x, y)) for i in range(n)]


def federation(engine: str, clients: list[Client], options: EngineOptions) -> BaseFederation:
    """The engine's federation over `clients`, connected, with `options`."""
    if engine == "in-process":
        return InProcessEngine(clients, PUBLIC, seed=0, options=options)
    from flwr.app import Message

    from cosmosfl.engines.flower import codec
    from cosmosfl.engines.flower.federation import FlowerFederation

    from .loopback import LoopbackGrid

    by_id = {c.id: c for c in clients}
    for c in clients:
        c.public_x = PUBLIC

    def client_app(msg: Message, context: Any) -> Message:  # serves this process's clients
        pid = int(context.node_config["partition-id"])
        items = codec.decode_batch(msg.content).items
        replies = [codec.ItemReply(codec.PROTOCOL, by_id[pid].handle(m)) for m in items]
        return Message(codec.encode_replies(pid, replies), reply_to=msg)

    fed = FlowerFederation(
        LoopbackGrid(client_app, len(clients)),  # type: ignore[arg-type]
        PUBLIC,
        2,
        expected_clients=list(by_id),
        seed=0,
        discovery_timeout=5.0,
        options=options,
    )
    fed.connect(poll_seconds=0.01)
    return fed


def predict(fed: BaseFederation, clients: range) -> dict[int, protocol.Reply]:
    return dict(fed.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in clients}))


class Probe(Algorithm):
    """Trains, then predicts, every client; reports the clients whose predictions came."""

    name = "probe"

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        fed.send({c: protocol.Message(protocol.TRAIN_LOCAL) for c in fed.client_ids})
        with fed.phase("prediction"):
            replies = predict(fed, fed.client_ids)
        rec = RoundRecord()
        rec.accuracy["x"] = {c: 1.0 for c in replies}
        return rec


# Client 0 is well, 1 drops out, 2 straggles, 3 crashes, 4 sends a corrupt (NaN) payload.
PLAN = {1: "dropout", 2: "straggler", 3: "crash", 4: "corrupt"}
FAULTY = EngineOptions(faults={"corrupt": 0.2, "corruption": "nan"})


def faulty_round(engine: str) -> tuple[dict[str, Any], list[Client]]:
    clients = make_clients(5)
    fed = federation(engine, clients, FAULTY)
    assert fed.faults is not None
    fed.faults.fault = lambda r, c, t: PLAN.get(c)  # type: ignore[method-assign]
    return fed.run_round(Probe(), 1, 1), clients


@pytest.mark.parametrize("engine", ENGINES)
def test_each_fault_has_the_same_effect(engine: str) -> None:
    record, clients = faulty_round(engine)
    assert record["accuracy"]["x"] == {"0": 1.0}
    # The straggler and the corrupt client did the work; the dropped-out and crashed did not.
    assert [c.learner.fits for c in clients] == [1, 0, 1, 0, 1]
    assert record["bytes_down"]["1"] == record["bytes_up"]["1"] == 0
    assert record["faults"] == [
        {"client": c, "task": task, "fault": PLAN[c]}
        for task in (protocol.TRAIN_LOCAL, protocol.PREDICT_PUBLIC)
        for c in sorted(PLAN)
    ]
    rejected = [(r["client"], r["task"]) for r in record["rejected"]]
    assert rejected == [
        (2, protocol.TRAIN_LOCAL),
        (3, protocol.TRAIN_LOCAL),
        (2, protocol.PREDICT_PUBLIC),
        (3, protocol.PREDICT_PUBLIC),
        (4, protocol.PREDICT_PUBLIC),
    ]  # step order, then client order, on both engines
    reasons = [r["reason"] for r in record["rejected"]]
    assert reasons[0] == reasons[2] == LATE
    assert "InjectedCrash" in reasons[1] and "InjectedCrash" in reasons[3]
    assert "non-finite" in reasons[4]


@pytest.mark.skipif(not flower_available(), reason="needs `pip install .[flower]`")
def test_both_engines_write_the_same_record_of_a_faulty_round() -> None:
    inproc, _ = faulty_round("in-process")
    flower, _ = faulty_round("flower")
    assert set(flower) - FLOWER_ONLY == set(inproc)
    for key in inproc:
        if key != "seconds":
            assert flower[key] == inproc[key], key
    assert flower["missing"] == []  # injected faults are not network failures


@pytest.mark.parametrize("engine", ENGINES)
def test_too_few_answers_end_the_run_with_the_same_error(engine: str) -> None:
    options = EngineOptions(faults={"dropout": 0.5}, min_participation=0.75)
    fed = federation(engine, make_clients(4), options)
    assert fed.faults is not None
    fed.faults.fault = lambda r, c, t: "dropout" if c < 2 else None  # type: ignore[method-assign]
    with pytest.raises(ParticipationError) as err:
        predict(fed, range(4))
    assert str(err.value) == (
        "round 0: only 2 of 4 clients answered task 'predict_public'; min_participation = 0.75 "
        "needs 3 (lower min_participation to train on fewer clients)"
    )
    fed.faults.fault = lambda r, c, t: "dropout"  # type: ignore[method-assign]
    with pytest.raises(ParticipationError) as err:
        predict(fed, range(4))
    assert str(err.value) == (
        "round 0: every client failed task 'predict_public'; first error: client 0 dropped out"
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_the_payload_limit_of_the_options_rejects_on_both(engine: str) -> None:
    fed = federation(engine, make_clients(2), EngineOptions(max_payload_bytes=16))
    assert fed.max_payload_bytes == 16
    with pytest.raises(
        ParticipationError, match=r"every client failed .*payload of 40 bytes exceeds 16"
    ):
        predict(fed, range(2))  # 5 x 2 float32


@pytest.mark.parametrize("engine", ENGINES)
def test_the_older_keywords_still_reach_the_engine(engine: str) -> None:
    fed = federation(engine, make_clients(2), EngineOptions())
    kind = type(fed)
    if engine == "in-process":
        fed = kind(make_clients(2), PUBLIC, min_participation=0.5, faults={"dropout": 0.5})
    else:
        fed = kind(fed.grid, PUBLIC, 2, expected_clients=[0, 1], min_participation=0.5,
                   faults={"dropout": 0.5})  # fmt: skip
    assert fed.options == EngineOptions(min_participation=0.5, faults={"dropout": 0.5})
    assert fed.min_participation == 0.5 and fed.faults is not None
