"""`cosmosfl bench`: runs a benchmark, prints its table, writes JSON; bad names are one line."""

import json

from cosmosfl.cli.main import main


def test_bench_clustering_quick_writes_json(tmp_path, capsys):
    assert main(["bench", "clustering", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| N " in out and "ARI vs planted" in out
    data = json.loads((tmp_path / "clustering.json").read_text())
    assert data["benchmark"] == "clustering" and data["machine"]["date"]
    # Planted groups are found by the exact and the approximate distances alike.
    assert all(r["ari_planted"] == 1.0 for r in data["data"]["runs"])


def test_bench_unknown_name_is_one_line(capsys):
    assert main(["bench", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0] and "clustering" in err[0]


def test_bench_without_data_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("COSMOSFL_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # no ../shared/data and no configs/ here
    assert main(["bench", "communication", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cosmosfl: error:" in err[0]


def test_time_box_stops_client_work_at_the_deadline_and_logs_what_ran():
    import time

    import pytest

    from cosmosfl.bench.accuracy import _OverBudget, _time_box

    class FakeClient:
        def __init__(self, cid):
            self.id, self.calls = cid, 0

        def handle(self, message):
            self.calls += 1
            return "reply"

    class Msg:
        task = "train_local"

    clients, log = [FakeClient(0), FakeClient(1)], []
    _time_box(clients, ["cnn", "alexnet"], time.perf_counter() + 3600, log)
    assert clients[1].handle(Msg()) == "reply"
    assert (
        log[0]["client"] == 1 and log[0]["model"] == "alexnet" and log[0]["task"] == "train_local"
    )
    late = [FakeClient(0)]
    _time_box(late, ["cnn"], time.perf_counter() - 1, log)
    with pytest.raises(_OverBudget):
        late[0].handle(Msg())
    assert late[0].calls == 0  # refused before doing any work


def test_bench_budget_must_be_positive(capsys):
    assert main(["bench", "time-to-accuracy", "--budget", "0"]) == 2
    assert "--budget must be > 0" in capsys.readouterr().err


def test_communication_benchmark_runs_the_seed_it_is_given(monkeypatch):
    import pytest

    from cosmosfl.bench import communication

    seen = []

    def fake_config(data_dir, config, overrides):
        seen.append(overrides)
        raise RuntimeError("stop before training")

    monkeypatch.setattr(communication, "paper_scale", lambda codecs: {})
    monkeypatch.setattr(communication, "cifar_config", fake_config)
    with pytest.raises(RuntimeError, match="stop"):
        communication.run(seed=7, codecs=("float32",))
    assert "seed=7" in seen[0]
