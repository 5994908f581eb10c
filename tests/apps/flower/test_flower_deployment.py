"""Flower's deployment runtime on 127.0.0.1: our own SuperLink and SuperNodes, a real
`flwr run`, a ClientApp process per message. Slow (minutes): run with
`python -m pytest -m slow tests/apps/flower/test_flower_deployment.py`."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.app import write_app
from cosmosfl.apps.flower.launch import LocalDeployment, _alive
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.rundir import read_records, read_summary

from ...engines.flower.test_flower_engine import SMALL

pytestmark = pytest.mark.slow


def _deploy(tmp_path, rounds: int, kill_after_round: int | None = None):  # type: ignore[no-untyped-def]
    cfg = load_config(
        None, [*SMALL, "data.num_clients=3", "clients.models=[mlp,cnn,mlp]", f"rounds={rounds}"]
    )
    out = tmp_path / "run"
    app = write_app(tmp_path / "app", cfg, out=str(out), **{"reply-timeout": 120.0}).parent
    seen: list[int] = []
    with LocalDeployment(tmp_path / "work", 3) as dep:

        def maybe_kill() -> None:
            done = len(read_records(out)) if (out / "metrics.jsonl").exists() else 0
            if kill_after_round is not None and done >= kill_after_round and not seen:
                dep.kill_supernode(2)
                seen.append(done)

        status = dep.wait(dep.submit(app), timeout=1800, on_poll=maybe_kill)
        started = dep.all_pids()
    return status, out, started, seen


def test_local_deployment_runs_cosmos_and_leaves_no_process_behind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    status, out, started, _ = _deploy(tmp_path, rounds=2)
    assert status == "finished:completed"
    records = read_records(out)
    assert [r["round"] for r in records] == [1, 2]
    for record in records:
        assert set(record["clusters"]) == {"0", "1", "2"}
        for model in ("local", "cluster_model", "client_model"):
            assert set(record["accuracy"][model]) == {"0", "1", "2"}
            assert all(0.0 <= a <= 1.0 for a in record["accuracy"][model].values())
        assert record["missing"] == [] and record["rejected"] == []
    summary = read_summary(out)
    assert summary["engine"] == "flower" and summary["rounds"] == 2
    assert started, "the deployment's processes were not found while it ran"
    assert not [pid for pid in started if _alive(pid)], "processes left behind"


def test_a_supernode_killed_mid_run_is_recorded_missing_and_the_run_goes_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    status, out, started, killed = _deploy(tmp_path, rounds=3, kill_after_round=1)
    assert status == "finished:completed" and killed
    records = read_records(out)
    assert [r["round"] for r in records] == [1, 2, 3]
    assert records[0]["missing"] == []
    last = records[-1]
    assert {m["client"] for m in last["missing"]} == {2}
    assert set(last["accuracy"]["client_model"]) == {"0", "1"}
    assert not [pid for pid in started if _alive(pid)], "processes left behind"


def test_tls_and_supernode_authentication(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """TLS on every SuperLink connection, and only registered SuperNode keys admitted."""
    cfg = load_config(None, [*SMALL, "data.num_clients=2", "clients.models=[mlp,mlp]", "rounds=1"])
    out = tmp_path / "run"
    app = write_app(tmp_path / "app", cfg, out=str(out), **{"reply-timeout": 120.0}).parent
    with LocalDeployment(tmp_path / "work", 2, tls=True, supernode_auth=True) as dep:
        status = dep.wait(dep.submit(app), timeout=1200)
        assert dep.superlink is not None and "--insecure" not in dep.superlink.args
        assert all("--insecure" not in node.args for node in dep.supernodes)
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not served: TLS only
            httpx.get(f"http://127.0.0.1:{dep.port}/", timeout=10)
    assert status == "finished:completed"
    assert len(read_records(out)) == 1
    assert (tmp_path / "work" / "keys" / "supernode-0.pub").read_text().startswith("ecdsa-sha2")
