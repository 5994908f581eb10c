"""`cosmosfl bench` (bench/runner.py): runs a benchmark, prints its table, writes JSON; bad names
are one line."""

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


def test_bench_budget_must_be_positive(capsys):
    assert main(["bench", "time-to-accuracy", "--budget", "0"]) == 2
    assert "--budget must be > 0" in capsys.readouterr().err
