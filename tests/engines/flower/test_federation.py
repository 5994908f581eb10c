"""The ServerApp-side federation (engines/flower/federation.py) over a loopback Grid and the real
ClientApp (no Ray): discovery by partition id, and failing, silent, offline and crashing
clients recorded while the round goes on."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.apps.flower.client_app import make_client_app
from cosmosfl.core import protocol
from cosmosfl.core.tasks import Evaluate, TrainLocal
from cosmosfl.experiment.config import load_config

from .loopback import LoopbackGrid
from .test_flower_engine import SMALL, federation, settings_for


def test_discovery_maps_partition_ids_not_node_ids() -> None:
    cfg = load_config(None, SMALL)
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), 4)
    fed = federation(cfg, grid)
    assert fed.client_ids == [0, 1, 2, 3]
    assert fed.unconnected == []


class _Probe(Algorithm):
    """Sends one metric-only and one array-returning request per round, reporting replies."""

    name = "probe"

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        record = RoundRecord()
        trained = fed.send(
            {c: protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 1}) for c in fed.client_ids}
        )
        probs = fed.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in fed.client_ids})
        record.info["trained"] = sorted(trained)
        record.info["predicted"] = sorted(probs)
        return record


def test_a_failing_a_silent_and_an_offline_client_are_recorded_and_the_run_goes_on() -> None:
    cfg = load_config(None, SMALL)

    def hook(client, item):  # type: ignore[no-untyped-def]
        if (
            client.id == 1
            and isinstance(item, protocol.Message)
            and item.task == protocol.TRAIN_LOCAL
        ):
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
            "task": protocol.TRAIN_LOCAL,
            "reason": "client reported an error: RuntimeError: disk full",
        }
    ]
    missing = {(m["client"], m["task"]) for m in second["missing"]}
    assert missing == {(2, protocol.TRAIN_LOCAL), (2, protocol.PREDICT_PUBLIC)}
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


class _ReadsLate(Algorithm):
    """Two metric-only steps, read only after both were sent."""

    name = "reads-late"

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        record = RoundRecord()
        trained = fed.send(dict.fromkeys(fed.client_ids, TrainLocal(1)))
        evaluated = fed.send(dict.fromkeys(fed.client_ids, Evaluate()))
        record.info["mapping"] = isinstance(trained, Mapping) and isinstance(evaluated, Mapping)
        record.info["trained"] = {c: r.task for c, r in trained.items()}  # first read: the trip
        record.info["evaluated"] = sorted(c for c, r in evaluated.items() if "top1" in r.metrics)
        return record


def test_replies_are_replies_read_when_first_read_and_queued_steps_share_a_round_trip() -> None:
    cfg = load_config(None, SMALL)
    fed = federation(cfg, LoopbackGrid(make_client_app(settings_for(cfg)), 4))
    record = fed.run_round(_ReadsLate(), 1, 1)
    assert record["mapping"] is True
    assert record["trained"] == dict.fromkeys(["0", "1", "2", "3"], protocol.TRAIN_LOCAL)
    assert record["evaluated"] == [0, 1, 2, 3]
    assert record["round_trips"] == 1  # both steps in one message per client
