"""The sweep report on hand-written sweep folders: numbers checked against hand computations."""

import json
import math
import os
import statistics

import pytest
import yaml

from cosmosfl.cli.main import main
from cosmosfl.experiment.config import ConfigError
from cosmosfl.reporting.ablation import table_markdown, write_ablation_report
from cosmosfl.reporting.sweep_data import is_numeric, lines_for, load_sweep


def write_run(path, algorithm, seed, final, *, reported="client_model", k=None, ari=None):
    """A finished one-round run; `final` is {model: (accuracy of client 0, client 1)}."""
    path.mkdir(parents=True)
    rec = {
        "round": 1,
        "primary_model": reported,
        "accuracy": {m: {"0": a, "1": b} for m, (a, b) in final.items()},
        "mean_accuracy": {m: (a + b) / 2 for m, (a, b) in final.items()},
        "bytes_up": {"0": 0, "1": 0},
        "bytes_down": {"0": 0, "1": 0},
        "seconds": {"total": 1.0},
    }
    (path / "metrics.jsonl").write_text(json.dumps(rec) + "\n")
    summary = {"algorithm": algorithm, "reported_model": reported, "rounds": 1, "seed": seed,
               "dataset": "toy", "num_clients": 2, "partition": "paper", "alpha": 0.5}  # fmt: skip
    if k is not None:
        summary.update(K=k, clusters={"0": 0, "1": 1})
    if ari is not None:
        summary["adjusted_rand_index"] = ari
    (path / "summary.json").write_text(json.dumps(summary))


def write_sweep(root, grid, cells, algorithms, seeds, shared=None):
    doc = {"grid": grid, "algorithms": algorithms, "seeds": seeds, "cells": cells,
           "shared_runs": shared or {}}  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / "sweep.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


# COSMOS per λ and seed: (h_π(i) of clients 0 and 1, f_i of both clients, K, ARI)
COSMOS = {
    0: {1: ((0.8, 0.9), 0.6, 2, 1.0), 2: ((0.7, 0.9), 0.7, 2, 0.5), 3: ((0.9, 0.9), 0.8, 2, 1.0)},
    5: {1: ((0.5, 0.7), 0.5, 2, 0.2), 2: ((0.6, 0.6), 0.5, 3, 0.4), 3: ((0.7, 0.9), 0.5, 3, 0.6)},
}
LOCAL = {1: (0.9, 0.7), 2: (0.6, 0.6), 3: (0.75, 0.75)}


@pytest.fixture
def lam_sweep(tmp_path):
    root = tmp_path / "sw"
    for lam, seeds in COSMOS.items():
        for seed, (h, f, k, ari) in seeds.items():
            final = {"cluster_model": h, "client_model": (f, f)}
            path = root / f"cosmos.lam={lam}" / "cosmos" / f"seed{seed}"
            write_run(path, "cosmos", seed, final, reported="cluster_model", k=k, ari=ari)
    for seed, acc in LOCAL.items():
        write_run(root / "cosmos.lam=0" / "local" / f"seed{seed}", "local", seed,
                  {"client_model": acc})  # fmt: skip
        link = root / "cosmos.lam=5" / "local" / f"seed{seed}"
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../cosmos.lam=0/local/seed{seed}", link)
    write_run(root / "cosmos.lam=0" / "fedmd" / "seed1", "fedmd", 1, {"client_model": (0, 0)})
    shared = {f"cosmos.lam=5/local/seed{s}": f"cosmos.lam=0/local/seed{s}" for s in LOCAL}
    write_sweep(
        root,
        [{"key": "cosmos.lam", "values": [0, 5], "folders": ["cosmos.lam=0", "cosmos.lam=5"]}],
        [{"path": f"cosmos.lam={v}", "values": {"cosmos.lam": v}} for v in (0, 5)],
        ["cosmos", "local"],  # fedmd's run above is not part of this sweep
        [1, 2, 3],
        shared,
    )
    return root


def by_hand(values):
    """Mean and SEM with the textbook formula (statistics.stdev: n - 1 in the denominator)."""
    return statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values))


def test_points_match_hand_computations(lam_sweep):
    sweep = load_sweep(lam_sweep)
    points = {(p.values["cosmos.lam"], p.algorithm, p.model): p for p in sweep.points}
    assert {a for _, a, _ in points} == {"cosmos", "local"}  # fedmd is not in the sweep
    for lam, seeds in COSMOS.items():
        h = points[lam, "cosmos", "cluster_model"]
        mean, sem = by_hand([(a + b) / 2 for (a, b), *_ in seeds.values()])
        assert (h.mean, h.sem) == (pytest.approx(mean), pytest.approx(sem))
        assert h.seeds == [1, 2, 3]
        assert h.clusters == [k for *_, k, _ in seeds.values()]
        f = points[lam, "cosmos", "client_model"]
        assert f.mean == pytest.approx(statistics.mean(s[1] for s in seeds.values()))
    # λ = 0: h_π(i) per seed 0.85, 0.80, 0.90 -> 85.00 ± 2.89 (SEM 0.05 / √3)
    assert points[0, "cosmos", "cluster_model"].sem == pytest.approx(0.05 / math.sqrt(3))
    local = [points[lam, "local", "client_model"] for lam in (0, 5)]
    mean, sem = by_hand([(a + b) / 2 for a, b in LOCAL.values()])
    assert [(p.mean, p.sem) for p in local] == [(pytest.approx(mean), pytest.approx(sem))] * 2
    assert sweep.shared == {"local": ["cosmos.lam"]}


def test_table_rows_and_notes(lam_sweep):
    text = table_markdown(load_sweep(lam_sweep), "cosmos.lam")
    assert text.startswith("# Final-round accuracy against cosmos.lam — toy, paper split, α = 0.5")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == (
        "| algorithm | evaluated model | cosmos.lam | Top-1 (%), final round, mean ± SEM "
        "| seeds (n) | K | ARI |"
    )
    ari0 = by_hand([1.0, 0.5, 1.0])
    ari5 = by_hand([0.2, 0.4, 0.6])
    h5 = by_hand([0.6, 0.6, 0.8])
    local = by_hand([0.8, 0.6, 0.75])
    assert rows[1:] == [
        f"| COSMOS | cluster model h_π(i) | 0 | 85.00 ± {100 * 0.05 / math.sqrt(3):.2f} "
        f"| 1, 2, 3 (n = 3) | 2 | {ari0[0]:.3f} ± {ari0[1]:.3f} |",
        f"| COSMOS | cluster model h_π(i) | 5 | {100 * h5[0]:.2f} ± {100 * h5[1]:.2f} "
        f"| 1, 2, 3 (n = 3) | 2.67 (2–3) | {ari5[0]:.3f} ± {ari5[1]:.3f} |",
        f"| COSMOS | distilled client model f_i^(t,2) | 0 | 70.00 ± {10 / math.sqrt(3):.2f} "
        f"| 1, 2, 3 (n = 3) | 2 | {ari0[0]:.3f} ± {ari0[1]:.3f} |",
        "| COSMOS | distilled client model f_i^(t,2) | 5 | 50.00 ± 0.00 "
        f"| 1, 2, 3 (n = 3) | 2.67 (2–3) | {ari5[0]:.3f} ± {ari5[1]:.3f} |",
        f"| local (reference) | client model f_i | 0 | {100 * local[0]:.2f} ± "
        f"{100 * local[1]:.2f} | 1, 2, 3 (n = 3) | — | — |",
        f"| local (reference) | client model f_i | 5 | {100 * local[0]:.2f} ± "
        f"{100 * local[1]:.2f} | 1, 2, 3 (n = 3) | — | — |",
    ]
    assert "local (reference) does not take cosmos.lam" in text


def test_write_report_files_and_unfinished_runs(lam_sweep):
    (lam_sweep / "cosmos.lam=5" / "cosmos" / "seed3" / "summary.json").unlink()
    report = write_ablation_report(lam_sweep)
    # the sweep has `local` runs: the per-client gains over it come with the ablation
    names = {"ablation-cosmos.lam.md", "ablation-cosmos.lam.png"}
    assert {p.name for p in report.files} == names | {"client-gains.md", "client-gains.png"}
    assert (lam_sweep / "ablation-cosmos.lam.png").stat().st_size > 5000
    assert any("cosmos.lam=5/cosmos/seed3" in n for n in report.notes)
    h5 = next(p for p in load_sweep(lam_sweep).points
              if p.values["cosmos.lam"] == 5 and p.model == "cluster_model")  # fmt: skip
    assert h5.seeds == [1, 2] and h5.mean == pytest.approx(0.6)  # seeds 1 and 2: 0.6, 0.6


def test_two_keys_one_line_per_value_of_the_other_key(tmp_path):
    root = tmp_path / "sw"
    grid = [
        {"key": "data.num_clients", "values": [4, 8]},
        {"key": "algorithm.server_model", "values": ["mlp", "cnn"]},
    ]
    cells = []
    for n in (4, 8):
        for model in ("mlp", "cnn"):
            path = f"data.num_clients={n}/algorithm.server_model={model}"
            acc = n / 10 + (0.05 if model == "cnn" else 0)
            write_run(tmp_path / "sw" / path / "cosmos" / "seed1", "cosmos", 1,
                      {"cluster_model": (acc, acc)}, reported="cluster_model")  # fmt: skip
            cells.append({"path": path, "values": {"data.num_clients": n,
                                                   "algorithm.server_model": model}})  # fmt: skip
    write_sweep(root, grid, cells, ["cosmos"], [1])
    sweep = load_sweep(root)
    assert is_numeric([4, 8]) and not is_numeric(["mlp", "cnn"]) and not is_numeric([True, 1])
    lines = lines_for(sweep, "algorithm.server_model")
    assert [ln.others for ln in lines] == [{"data.num_clients": 4}, {"data.num_clients": 8}]
    assert [[p.mean for p in ln.points] for ln in lines] == [
        [pytest.approx(0.4), pytest.approx(0.45)],
        [pytest.approx(0.8), pytest.approx(0.85)],
    ]  # grid order of the values: mlp, then cnn
    text = table_markdown(sweep, "algorithm.server_model")
    assert "| 8 | COSMOS | cluster model h_π(i) | cnn | 85.00 ± 0.00 | 1 (n = 1) | — | — |" in text
    assert "toy, paper split, α = 0.5, 1 round" in text  # num_clients is swept: not in the title
    assert "2 clients" not in text.splitlines()[0]
    code = main(["report", str(root)])  # the report command knows a sweep folder
    assert code == 0
    for key in ("data.num_clients", "algorithm.server_model"):
        assert (root / f"ablation-{key}.png").stat().st_size > 5000


def test_not_a_sweep_or_nothing_finished(tmp_path):
    with pytest.raises(ConfigError, match="not a sweep folder"):
        load_sweep(tmp_path)
    grid = [{"key": "rounds", "values": [1]}]
    write_sweep(tmp_path, grid, [{"path": "rounds=1", "values": {"rounds": 1}}], ["local"], [1])
    with pytest.raises(ConfigError, match="no finished runs in the sweep"):
        load_sweep(tmp_path)
