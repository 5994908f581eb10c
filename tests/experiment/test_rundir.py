"""metrics.csv: the records' per-client numbers as rows, kept equal to metrics.jsonl."""

import csv

from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.rundir import CSV_COLUMNS, RunDirectory, metrics_csv, read_records
from cosmosfl.experiment.runner import run_experiment


def record(t, clusters=True):
    rec = {
        "round": t,
        "primary_model": "cluster_model",
        "accuracy": {
            "cluster_model": {"0": 0.5 + t / 10, "1": 0.25},
            "client_model": {"0": 0.125, "1": 0.75},
        },
        "bytes_up": {"0": 100 * t, "1": 7},
        "bytes_down": {"0": 3, "1": 4},
    }
    if clusters:
        rec.update(clusters={"0": 1, "1": 0}, K=2)
    return rec


def rows(text):
    return list(csv.DictReader(text.splitlines()))


def test_one_row_per_round_client_and_model():
    got = rows(metrics_csv([record(1), record(2, clusters=False)]))
    assert list(got[0]) == list(CSV_COLUMNS)
    assert len(got) == 2 * 2 * 2
    first = got[0]
    assert first == {
        "round": "1", "client": "0", "model": "cluster_model", "reported": "1",
        "accuracy": "0.6", "top5": "", "cluster": "1", "K": "2",
        "bytes_up": "100", "bytes_down": "3",
    }  # fmt: skip
    client_model = [r for r in got if r["model"] == "client_model" and r["round"] == "2"]
    assert [(r["client"], r["reported"], float(r["accuracy"])) for r in client_model] == [
        ("0", "0", 0.125),
        ("1", "0", 0.75),
    ]
    assert {r["cluster"] for r in got if r["round"] == "2"} == {""}  # no clusters recorded
    assert [r["bytes_up"] for r in got if r["round"] == "2"] == ["200", "7", "200", "7"]


def test_appending_and_rewriting_keep_csv_equal_to_jsonl(tmp_path):
    run = RunDirectory(tmp_path)
    for t in (1, 2, 3):
        run.append_record(record(t))
    text = (tmp_path / "metrics.csv").read_text()
    assert text == metrics_csv(read_records(tmp_path))
    assert text.count("round,client") == 1  # one header, however many appends
    run.rewrite_records([record(1)])  # a resume drops rounds past the checkpoint
    assert (tmp_path / "metrics.csv").read_text() == metrics_csv([record(1)])


def test_a_real_run_writes_metrics_csv(tmp_path):
    cfg = load_config(
        None,
        ["rounds=1", "threads=1", "data.num_clients=4", "data.num_groups=2",
         "algorithm.target_clusters=2", "algorithm.pretrain_epochs=1",
         "algorithm.server_epochs=1", "algorithm.distill_epochs=1",
         "algorithm.server_model=mlp"],
    )  # fmt: skip
    run_experiment(cfg, tmp_path, progress=False)
    got = rows((tmp_path / "metrics.csv").read_text())
    (rec,) = read_records(tmp_path)
    assert len(got) == 4 * len(rec["accuracy"])  # clients × evaluation points
    for row in got:
        assert float(row["accuracy"]) == rec["accuracy"][row["model"]][row["client"]]
        assert int(row["cluster"]) == rec["clusters"][row["client"]]
        assert int(row["K"]) == rec["K"]
    reported = {r["model"] for r in got if r["reported"] == "1"}
    assert reported == {"deployed"}  # COSMOS's validated recipe reports what clients deploy
