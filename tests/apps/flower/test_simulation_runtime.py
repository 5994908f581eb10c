"""COSMOS on Flower's simulation runtime (Ray) against the in-process engine, and an audit of
the messages clients actually send through Flower. One Flower run serves both tests: starting
Ray costs tens of seconds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")
pytest.importorskip("ray", reason="Flower's simulation runtime needs flwr[simulation]")

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
from flwr.serverapp import Grid

from cosmosfl.apps.flower.simulation_runtime import simulate_on_flower
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.rundir import read_records, read_summary
from cosmosfl.experiment.runner import run_experiment

from ...engines.flower.test_flower_engine import SMALL


class RecordingGrid(Grid):
    """Delegates to Flower's Grid and keeps every reply message that comes back (pulled: the
    ServerApp's PromptGrid waits for replies with push and pull, not send_and_receive)."""

    def __init__(self, inner: Grid) -> None:
        self.inner = inner
        self.replies: list[Any] = []

    def set_run(self, run):  # type: ignore[no-untyped-def]
        self.inner.set_run(run)

    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self.inner.run

    def create_message(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return self.inner.create_message(*args, **kwargs)

    def get_node_ids(self):  # type: ignore[no-untyped-def]
        return self.inner.get_node_ids()

    def push_messages(self, messages):  # type: ignore[no-untyped-def]
        return self.inner.push_messages(messages)

    def pull_messages(self, message_ids):  # type: ignore[no-untyped-def]
        replies = list(self.inner.pull_messages(message_ids))
        self.replies.extend(replies)
        return replies

    def send_and_receive(self, messages, *, timeout=None):  # type: ignore[no-untyped-def]
        raise AssertionError("the ServerApp should wait for replies through PromptGrid")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):  # type: ignore[no-untyped-def]
    cfg = load_config(None, SMALL)
    base = tmp_path_factory.mktemp("flower")
    sim = run_experiment(cfg, base / "sim", progress=False)
    grids: list[RecordingGrid] = []

    def record(grid: Grid) -> Grid:
        grids.append(RecordingGrid(grid))
        return grids[-1]

    summary = simulate_on_flower(cfg, base / "flower", grid_hook=record)
    return cfg, sim, base / "flower", summary, grids[0]


def test_cosmos_on_flower_simulation_equals_the_in_process_engine(runs) -> None:  # type: ignore[no-untyped-def]
    _, sim, flower_dir, summary, _ = runs
    records = read_records(flower_dir)
    assert len(records) == len(sim.records) == 2
    for ours, theirs in zip(records, sim.records, strict=True):
        assert ours["clusters"] == theirs["clusters"]
        assert set(ours["accuracy"]) == {"local", "cluster_model", "client_model", "deployed"}
        for model, per_client in theirs["accuracy"].items():
            assert set(ours["accuracy"][model]) == set(per_client)
            for cid, acc in per_client.items():
                assert ours["accuracy"][model][cid] == pytest.approx(acc, abs=1e-6)
        assert ours["bytes_up"] == theirs["bytes_up"]
        assert ours["missing"] == [] and ours["rejected"] == []
    assert summary["engine"] == "flower"
    assert read_summary(flower_dir)["clusters"] == {str(c): k for c, k in sim.clusters.items()}


def test_clients_send_only_soft_labels_on_u_and_scalars(runs) -> None:  # type: ignore[no-untyped-def]
    cfg, sim, _, _, grid = runs
    n, m = 270, 10  # |U| and M for digits with public_fraction 0.2 (see SMALL)
    assert len(sim.records) and grid.replies, "no Flower replies were recorded"
    arrays_seen = 0
    for reply in grid.replies:
        assert not reply.has_error(), reply.error if reply.has_error() else None
        content = reply.content
        for record in content.values():
            if isinstance(record, ArrayRecord):
                for name, array in record.items():
                    value = array.numpy()
                    assert name == "probs", f"clients may only send soft labels, got {name!r}"
                    assert value.shape == (n, m) and value.dtype == np.float32
                    np.testing.assert_allclose(value.sum(axis=1), 1.0, atol=1e-3)
                    arrays_seen += 1
            else:
                assert isinstance(record, ConfigRecord | MetricRecord)
                for value in record.values():
                    assert isinstance(value, bool | int | float | str), type(value)
    # one prediction per client per round, and nothing else array-shaped
    assert arrays_seen == cfg.data.num_clients * cfg.rounds


@pytest.mark.slow
def test_faults_on_flower_simulation_equal_the_in_process_records(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every fault mode through Flower's simulation runtime (Ray): the in-process records.
    Slow (a second Ray start); the default suite checks the same over the loopback Grid
    (tests/engines/flower/test_flower_faults.py)."""
    from ...engines.flower.test_flower_faults import MIXED, assert_same_records

    cfg = load_config(None, SMALL + MIXED)
    sim = run_experiment(cfg, tmp_path / "sim", progress=False)
    simulate_on_flower(cfg, tmp_path / "flower")
    records = read_records(tmp_path / "flower")
    assert_same_records(records, sim.records)
    assert {f["fault"] for r in records for f in r["faults"]} == {
        "dropout",
        "straggler",
        "crash",
        "corrupt",
    }
