"""Per-client gains over `local` on a hand-written compare folder whose numbers are worked out
by hand below (per seed, then mean ± SEM over seeds with the standard library)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from cosmosfl.cli.main import main
from cosmosfl.reporting.client_gains import client_gains
from cosmosfl.reporting.runset import load_runs

KINDS = {"0": "cnn", "1": "cnn", "2": "mlp", "3": "mlp"}

# Last-round accuracy of clients 0-3 per seed (test splits of 100 samples: k / 100).
LOCAL = {1: (0.80, 0.70, 0.60, 0.90), 2: (0.75, 0.70, 0.65, 0.85), 3: (0.80, 0.80, 0.60, 0.90)}
COSMOS = {1: (0.85, 0.70, 0.55, 0.88), 2: (0.80, 0.72, 0.64, 0.85), 3: (0.90, 0.81, 0.50, 0.90)}
COMET = {1: (0.81, 0.71, 0.61, 0.91), 2: LOCAL[2], 3: (0.79, 0.79, 0.59, 0.89)}

# By hand, COSMOS's h_π(i) minus local, in points, per seed:
#   seed 1: +5, 0, -5, -2   seed 2: +5, +2, -1, 0   seed 3: +10, +1, -10, 0
# Seed 2's client 2 loses exactly one point (0.64 - 0.65 is -1.0000000000000009 in floating
# point): "more than one point" must not count it.
COSMOS_BY_SEED = {
    "gaining": [1 / 4, 2 / 4, 2 / 4],
    "losing": [2 / 4, 0 / 4, 1 / 4],
    "median": [-1.0, 1.0, 0.5],
    "worst": [-5.0, -1.0, -10.0],
    "mean": [-0.5, 1.5, 0.25],
}
# Per kind: cnn = clients 0, 1 (+5, 0 | +5, +2 | +10, +1); mlp = clients 2, 3.
COSMOS_CNN = {
    "gaining": [0.5, 1.0, 1.0],
    "losing": [0.0, 0.0, 0.0],
    "median": [2.5, 3.5, 5.5],
    "worst": [0.0, 2.0, 1.0],
}
COSMOS_MLP = {
    "gaining": [0.0, 0.0, 0.0],
    "losing": [1.0, 0.0, 0.5],
    "median": [-3.5, -0.5, -5.0],
    "worst": [-5.0, -1.0, -10.0],
}
# COMET: +1 for every client on seed 1, 0 on seed 2, -1 on seed 3 (not "more than one point").
COMET_BY_SEED = {
    "gaining": [1.0, 0.0, 0.0],
    "losing": [0.0, 0.0, 0.0],
    "median": [1.0, 0.0, -1.0],
    "worst": [1.0, 0.0, -1.0],
    "mean": [1.0, 0.0, -1.0],
}


def by_hand(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) / len(values) ** 0.5


def write_run(root: Path, algorithm: str, seed: int, models: dict[str, tuple], **summary) -> None:
    """A finished run of two rounds; `models` holds the last round's client accuracies."""
    path = root / algorithm / f"seed{seed}"
    path.mkdir(parents=True)
    reported = next(iter(models))
    records = []
    for t in (1, 2):
        accs = {m: (a if t == 2 else tuple(0.5 for _ in a)) for m, a in models.items()}
        records.append(
            {
                "round": t,
                "algorithm": algorithm,
                "primary_model": reported,
                "accuracy": {m: {str(i): x for i, x in enumerate(a)} for m, a in accs.items()},
                "mean_accuracy": {m: sum(a) / len(a) for m, a in accs.items()},
                "bytes_up": {str(i): 10 for i in range(len(KINDS))},
                "bytes_down": {str(i): 10 for i in range(len(KINDS))},
            }
        )
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    info = {
        "algorithm": algorithm,
        "reported_model": reported,
        "seed": seed,
        "rounds": 2,
        "dataset": "toy",
        "partition": "paper",
        "alpha": 0.5,
        "num_clients": 4,
        "num_classes": 10,
        "client_models": dict(KINDS),
        "client_parameters": {c: 100 for c in KINDS},
    }
    (path / "summary.json").write_text(json.dumps({**info, **summary}))


def compare_folder(root: Path, local: bool = True, kinds: dict[str, str] | None = None) -> Path:
    for seed in (1, 2, 3):
        extra = {"client_models": kinds} if kinds else {}
        client = tuple(LOCAL[seed])  # COSMOS's f_i^(t,2): exactly local's, a gain of 0
        cosmos = {"cluster_model": COSMOS[seed], "client_model": client}
        write_run(root, "cosmos", seed, cosmos, **extra)
        write_run(root, "comet", seed, {"client_model": COMET[seed]}, **extra)
        if local:
            write_run(root, "local", seed, {"client_model": LOCAL[seed]}, **extra)
    return root


def check(row, expected: dict[str, list[float]]) -> None:
    for name, per_seed in expected.items():
        mean, sem = by_hand(per_seed)
        stat = getattr(row, name)
        assert (stat.mean, stat.sem) == (pytest.approx(mean), pytest.approx(sem)), name


def test_gains_over_local_match_the_hand_computed_numbers(tmp_path):
    gains = client_gains(load_runs(compare_folder(tmp_path)))
    rows = {(r.algorithm, r.model): r for r in gains.rows}
    # local itself is the reference, not a row; COSMOS's two evaluation points and COMET are
    assert set(rows) == {
        ("cosmos", "cluster_model"),
        ("cosmos", "client_model"),
        ("comet", "client_model"),
    }
    cosmos = rows["cosmos", "cluster_model"]
    assert cosmos.seeds == [1, 2, 3] and cosmos.clients == [4, 4, 4]
    check(cosmos, COSMOS_BY_SEED)
    check(rows["comet", "client_model"], COMET_BY_SEED)
    same = rows["cosmos", "client_model"]  # identical to local on every client: no gain
    assert (same.gaining.mean, same.losing.mean, same.worst.mean) == (0.0, 0.0, 0.0)
    # The plot's pooled gains: all 12 client-seed pairs
    pooled = sorted(cosmos.pooled)
    assert pooled == pytest.approx(sorted([5, 0, -5, -2, 5, 2, -1, 0, 10, 1, -10, 0]))
    assert gains.reported_models["cosmos"] == "cluster_model"


def test_per_kind_rows_where_the_federation_mixes_kinds(tmp_path):
    gains = client_gains(load_runs(compare_folder(tmp_path)))
    assert gains.kinds == ["cnn", "mlp"]
    kinds = {(r.algorithm, r.model, r.kind): r for r in gains.kind_rows}
    cnn, mlp = kinds["cosmos", "cluster_model", "cnn"], kinds["cosmos", "cluster_model", "mlp"]
    assert cnn.clients == [2, 2, 2] and mlp.clients == [2, 2, 2]
    check(cnn, COSMOS_CNN)
    check(mlp, COSMOS_MLP)


def test_one_kind_of_client_has_no_per_kind_rows(tmp_path):
    same = {c: "mlp" for c in KINDS}
    gains = client_gains(load_runs(compare_folder(tmp_path, kinds=same)))
    assert gains.rows and gains.kind_rows == [] and gains.kinds == []


def test_report_writes_the_table_and_plot(tmp_path, capsys):
    root = compare_folder(tmp_path / "cmp")
    assert main(["report", str(root)]) == 0
    out = capsys.readouterr().out
    text = (root / "client-gains.md").read_text()
    # COSMOS h_π(i): gaining 41.7 ± 8.3 %, losing 25.0 ± 14.4 %, median +0.17 ± 0.60,
    # worst -5.33 ± 2.60, mean +0.42 ± 0.58 points (by_hand of the lists above)
    line = next(ln for ln in text.splitlines() if ln.startswith("| COSMOS | cluster model"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    expected = [by_hand(COSMOS_BY_SEED[k]) for k in ("gaining", "losing")]
    assert cells[3:5] == [f"{100 * m:.1f} ± {100 * s:.1f}" for m, s in expected]
    expected = [by_hand(COSMOS_BY_SEED[k]) for k in ("median", "worst", "mean")]
    assert cells[5:8] == [f"{m:+.2f} ± {s:.2f}" for m, s in expected]
    written = ["41.7 ± 8.3", "25.0 ± 14.4", "+0.17 ± 0.60", "-5.33 ± 2.60", "+0.42 ± 0.58"]
    assert cells[3:8] == written
    assert cells[2] == "4" and cells[8] == "1, 2, 3 (n = 3)"
    assert "## Per client kind (cnn, mlp)" in text
    assert "| COSMOS | cluster model h_π(i) | mlp | 2 | 0.0 ± 0.0 | 50.0 ± 28.9 |" in text
    png = root / "client-gains.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    # the printed summary names each algorithm's reported model
    assert "COSMOS vs `local`, per client: 41.7 ± 8.3 % gain" in out
    assert f"wrote {png}" in out


def test_without_local_the_report_says_so_and_skips(tmp_path, capsys):
    root = compare_folder(tmp_path / "cmp", local=False)
    gains = client_gains(load_runs(root))
    assert gains.rows == [] and not gains.has_baseline
    assert main(["report", str(root)]) == 0
    out = capsys.readouterr().out
    assert "no `local` run" in out and "client-gains.md and client-gains.png not written" in out
    assert not (root / "client-gains.md").exists() and not (root / "client-gains.png").exists()
    assert (root / "table.md").is_file()  # the rest of the report is still written


def test_a_local_run_on_other_splits_is_not_paired(tmp_path):
    root = compare_folder(tmp_path)
    summary = root / "local" / "seed2" / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "alpha": 5.0}))
    gains = client_gains(load_runs(root))
    cosmos = next(r for r in gains.rows if r.model == "cluster_model")
    assert cosmos.seeds == [1, 3]
    check(cosmos, {k: [v[0], v[2]] for k, v in COSMOS_BY_SEED.items()})
    assert any("seed 2: not paired" in n and "alpha" in n for n in gains.notes)


def test_assembled_ablation_reports_gains_per_cell(tmp_path, capsys):
    with_local = compare_folder(tmp_path / "a")
    without = compare_folder(tmp_path / "b", local=False)
    out = tmp_path / "abl"
    args = ["report", str(out), "--key", "cosmos.lam", "--cell", f"0={with_local}"]
    assert main([*args, "--cell", f"5={without}"]) == 0
    assert f"wrote {out / 'client-gains.png'}" in capsys.readouterr().out
    text = (out / "client-gains.md").read_text()
    first, second = text.split("## cosmos.lam = 5")
    assert "## cosmos.lam = 0" in first
    assert "| COSMOS | cluster model h_π(i) | 4 | 41.7 ± 8.3 |" in first
    assert "Skipped: no `local` run" in second
