"""`cosmosfl report` on hand-written run directories with known numbers."""

import json
import math

import pytest

from cosmosfl.experiment.config import ConfigError
from cosmosfl.reporting.report import (
    accuracy_rows,
    communication_rows,
    load_runs,
    write_report,
)


def write_run(
    root,
    algorithm,
    seed,
    rounds,
    *,
    reported="client_model",
    up=(0, 0),
    down=(0, 0),
    params=(1000, 3000),
    num_classes=10,
    top5=None,
    clusters=None,
):
    """A finished run: `rounds` is a list of {model: [accuracy of client 0, client 1]}."""
    path = root / algorithm / f"seed{seed}"
    path.mkdir(parents=True)
    lines = []
    for t, accs in enumerate(rounds, 1):
        rec = {
            "round": t,
            "algorithm": algorithm,
            "primary_model": reported,
            "accuracy": {m: {"0": a[0], "1": a[1]} for m, a in accs.items()},
            "mean_accuracy": {m: (a[0] + a[1]) / 2 for m, a in accs.items()},
            "bytes_up": {"0": up[0], "1": up[1]},
            "bytes_down": {"0": down[0], "1": down[1]},
            "seconds": {"total": 1.0},
            "rejected": [],
        }
        if top5 is not None:
            rec["top5"] = {m: {"0": a[0], "1": a[1]} for m, a in top5[t - 1].items()}
            rec["mean_top5"] = {m: (a[0] + a[1]) / 2 for m, a in top5[t - 1].items()}
        lines.append(json.dumps(rec))
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    summary = {
        "algorithm": algorithm,
        "reported_model": reported,
        "rounds": len(rounds),
        "seed": seed,
        "dataset": "toy",
        "num_clients": 2,
        "client_parameters": {"0": params[0], "1": params[1]},
        "num_classes": num_classes,
        "partition": "paper",
        "alpha": 0.5,
    }
    if clusters is not None:
        summary.update(
            clusters=clusters, true_groups={"0": 0, "1": 1}, adjusted_rand_index=1.0, K=2
        )
    (path / "summary.json").write_text(json.dumps(summary))
    return path


# Final-round client accuracies per seed (two clients each), and by hand:
# cosmos h_π(i): seed means 0.85, 0.80, 0.90 -> mean 0.85, sample std 0.05, SEM 0.05/√3
COSMOS_FINAL = {1: (0.8, 0.9), 2: (0.7, 0.9), 3: (0.9, 0.9)}
COSMOS_SEM = 0.05 / math.sqrt(3)
# fedmd: seed means 0.60, 0.62, 0.64 -> mean 0.62, std 0.02, SEM 0.02/√3: far below COSMOS
FEDMD_FINAL = {1: (0.6, 0.6), 2: (0.62, 0.62), 3: (0.64, 0.64)}
# comet: seed means 0.83, 0.85, 0.87 -> mean 0.85: overlaps COSMOS
COMET_FINAL = {1: (0.83, 0.83), 2: (0.85, 0.85), 3: (0.87, 0.87)}


def cosmos_runs(root, **kw):
    for seed, final in COSMOS_FINAL.items():
        rounds = [
            {"cluster_model": (0.5, 0.5), "client_model": (0.4, 0.4)},
            {"cluster_model": final, "client_model": (0.7, 0.7)},
        ]
        write_run(
            root,
            "cosmos",
            seed,
            rounds,
            reported="cluster_model",
            up=(1000 * seed, 3000 * seed),
            down=(500, 500),
            clusters={"0": 0, "1": 1},
            **kw,
        )


def baseline_runs(root, name, finals, first_round=0.7):
    for seed, final in finals.items():
        rounds = [{"client_model": (first_round, first_round)}, {"client_model": final}]
        write_run(root, name, seed, rounds, up=(10, 10), down=(10, 10))


def test_mean_sem_best_round_and_dagger_when_separated(tmp_path):
    cosmos_runs(tmp_path)
    baseline_runs(tmp_path, "fedmd", FEDMD_FINAL)
    baseline_runs(tmp_path, "local", COSMOS_FINAL)  # a reference: never blocks the dagger
    rows = {(r.algorithm, r.model): r for r in accuracy_rows(load_runs(tmp_path))}
    cosmos = rows["cosmos", "cluster_model"]
    assert cosmos.mean == pytest.approx(0.85) and cosmos.sem == pytest.approx(COSMOS_SEM)
    assert cosmos.seeds == [1, 2, 3]
    fedmd = rows["fedmd", "client_model"]
    assert fedmd.mean == pytest.approx(0.62) and fedmd.sem == pytest.approx(0.02 / math.sqrt(3))
    # fedmd's round 1 (0.70) beats its final round (0.62): shown only as the best round
    assert (fedmd.best_round, fedmd.best_value) == (1, pytest.approx(0.7))
    assert cosmos.dagger and not fedmd.dagger
    # COSMOS's distilled client model is shown too, in its own row, never with the dagger
    assert rows["cosmos", "client_model"].mean == pytest.approx(0.7)
    assert not rows["cosmos", "client_model"].dagger

    report = write_report(tmp_path)
    table = (tmp_path / "table.md").read_text()
    assert "toy, paper split, α = 0.5, 2 clients, 2 rounds" in table
    assert f"85.00 ± {100 * COSMOS_SEM:.2f} †" in table  # 85.00 ± 2.89 †
    assert f"62.00 ± {100 * 0.02 / math.sqrt(3):.2f} |" in table
    assert "best round (not the result)" in table and "70.00 (round 1)" in table
    assert "Top-5" not in table  # 10 classes
    order = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    assert order[1:] == ["COSMOS", "COSMOS", "FedMD", "local (reference)"]
    assert "† on COSMOS" in table and "lies above the baselines" in table
    tex = (tmp_path / "table.tex").read_text()
    assert r"85.00 $\pm$ 2.89$^\dagger$" in tex and r"\toprule" in tex
    assert report.rows and "table.md" in report.text()
    for png in ("curves.png", "clusters.png"):
        assert (tmp_path / png).stat().st_size > 5000


def test_no_dagger_when_an_interval_overlaps(tmp_path):
    cosmos_runs(tmp_path)
    baseline_runs(tmp_path, "fedmd", FEDMD_FINAL)
    baseline_runs(tmp_path, "comet", COMET_FINAL)
    rows = accuracy_rows(load_runs(tmp_path))
    assert [r.dagger for r in rows] == [False] * len(rows)
    write_report(tmp_path)
    assert "†  |" not in (tmp_path / "table.md").read_text()
    assert " † |" not in (tmp_path / "table.md").read_text()


def test_top5_columns_only_with_at_least_20_classes(tmp_path):
    for seed, (a, b) in {1: (0.5, 0.7), 2: (0.7, 0.9)}.items():
        write_run(
            tmp_path,
            "local",
            seed,
            [{"client_model": (a, b)}],
            num_classes=100,
            top5=[{"client_model": (a + 0.2, b + 0.1)}],
        )
    rows = accuracy_rows(load_runs(tmp_path))
    # top-5 seed means 0.75 and 0.95 -> mean 0.85, std √0.02, SEM √0.02/√2 = 0.1
    assert rows[0].top5 == (pytest.approx(0.85), pytest.approx(0.1))
    write_report(tmp_path)
    table = (tmp_path / "table.md").read_text()
    assert "Top-5 (%), final round" in table and "85.00 ± 10.00" in table
    assert "70.00 ± 10.00" in table  # top-1 seed means 0.6 and 0.8


def test_communication_matches_hand_computation(tmp_path):
    cosmos_runs(tmp_path)
    write_run(tmp_path, "local", 1, [{"client_model": (0.5, 0.5)}], params=(1000, None))
    write_run(tmp_path, "fedct", 1, [{"client_model": (0.5, 0.5)}], params=(None, None))
    rows = {r.algorithm: r for r in communication_rows(load_runs(tmp_path))}
    # up: client mean 2000·seed bytes every round; seeds 1, 2, 3 -> 4000 B = 0.004 MB
    assert rows["cosmos"].up_mb == pytest.approx(0.004)
    assert rows["cosmos"].down_mb == pytest.approx(0.0005)
    # FedAvg: mean of 1000 and 3000 parameters × 4 bytes = 8000 B = 0.008 MB each way
    assert rows["cosmos"].fedavg_mb == pytest.approx(0.008)
    assert rows["local"].fedavg_mb == pytest.approx(0.004)  # the torch client only
    assert rows["fedct"].fedavg_mb is None
    write_report(tmp_path)
    text = (tmp_path / "communication.md").read_text()
    # (0.004 + 0.0005) / (2 · 0.008) = 0.28125
    assert "| COSMOS | 0.004 | 0.0005 | 0.008 | 0.281× |" in text
    assert "0.004 (1 of 2 clients)" in text
    assert "n/a (no torch client)" in text


def test_unfinished_runs_are_ignored_but_mentioned(tmp_path):
    cosmos_runs(tmp_path)
    partial = tmp_path / "fedmd" / "seed1"
    partial.mkdir(parents=True)
    (partial / "metrics.jsonl").write_text("")
    report = write_report(tmp_path)
    assert [r.algorithm for r in report.rows] == ["cosmos", "cosmos"]
    assert any(str(partial) in note for note in report.notes)
    assert f"unfinished run ignored: {partial}" in report.text()


def test_missing_or_empty_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        write_report(tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"no finished runs.*seed<k>"):
        write_report(tmp_path)
