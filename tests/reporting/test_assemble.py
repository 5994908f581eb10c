"""Ablation reports from separately run comparison folders (`cosmosfl report OUT --key --cell`),
the paired-difference columns (--base, --versus) and split comparison folders; numbers checked
against hand computations on hand-written runs."""

import math
import shutil
import statistics
from pathlib import Path

import pytest

from cosmosfl.cli.main import main
from cosmosfl.experiment.config import ConfigError
from cosmosfl.reporting.assemble import assemble_sweep, parse_cell, write_assembled_report
from cosmosfl.reporting.contrasts import parse_base
from cosmosfl.reporting.runset import load_runs
from cosmosfl.reporting.sweep_data import lines_for

from .test_ablation import COSMOS, LOCAL, lam_sweep, write_run  # noqa: F401 (fixture)

# COMET's per-seed accuracies of clients 0 and 1 (one run, shared by every cell)
COMET = {1: (0.8, 0.8), 2: (0.7, 0.75), 3: (0.85, 0.8)}


def mean_of(pair):
    return (pair[0] + pair[1]) / 2


def paired_by_hand(a, b):
    """Per-seed differences a - b, then the textbook mean and SEM (n - 1 in the stdev)."""
    diffs = [a[s] - b[s] for s in sorted(a)]
    return statistics.mean(diffs), statistics.stdev(diffs) / math.sqrt(len(diffs)), diffs


@pytest.fixture
def split_runs(tmp_path):
    """COSMOS per λ in one comparison folder per seed (runs/lam<v>/cosmos-s<k>/cosmos/seed<k>,
    as two processes at once would write them), and `local` + COMET in a reference folder."""
    for lam, seeds in COSMOS.items():
        for seed, (h, f, k, ari) in seeds.items():
            path = tmp_path / f"lam{lam}" / f"cosmos-s{seed}" / "cosmos" / f"seed{seed}"
            final = {"cluster_model": h, "client_model": (f, f)}
            write_run(path, "cosmos", seed, final, reported="cluster_model", k=k, ari=ari)
    for seed in LOCAL:
        write_run(tmp_path / "refs" / "local" / f"seed{seed}", "local", seed,
                  {"client_model": LOCAL[seed]})  # fmt: skip
        write_run(tmp_path / "refs" / "comet" / f"seed{seed}", "comet", seed,
                  {"client_model": COMET[seed]})  # fmt: skip
    return tmp_path


def h_of(lam):
    return {s: mean_of(v[0]) for s, v in COSMOS[lam].items()}


def test_split_comparison_folder_loads_as_one(split_runs):
    runset = load_runs(split_runs / "lam0", nested=True)
    assert list(runset.runs) == ["cosmos"]
    assert [r.seed for r in runset.runs["cosmos"]] == [1, 2, 3]
    # a compare folder is read at its own depth only: a folder of compare folders is not one
    with pytest.raises(ConfigError, match="no finished runs"):
        load_runs(split_runs / "lam0")
    # a second finished run of the same algorithm and seed: which one to report is not said
    write_run(split_runs / "lam0" / "again" / "cosmos" / "seed2", "cosmos", 2,
              {"cluster_model": (0.1, 0.1)}, reported="cluster_model")  # fmt: skip
    with pytest.raises(ConfigError, match="two finished runs of cosmos seed 2"):
        load_runs(split_runs / "lam0", nested=True)


def test_assembled_points_and_paired_columns(split_runs):
    cells = [(0, split_runs / "lam0"), (5, split_runs / "lam5")]
    out = split_runs / "report"
    shared, base = [split_runs / "refs"], {"cosmos.lam": 0}
    report = write_assembled_report(out, ["cosmos.lam"], cells, shared, base, ["local", "comet"])
    table = report.tables["cosmos.lam"]
    rows = {}
    for line in table.splitlines():
        cells_ = [c.strip() for c in line.strip("|").split("|")]
        if len(cells_) == 10 and cells_[0] in ("COSMOS", "COMET", "local (reference)"):
            rows[cells_[0], cells_[1].split(" ")[0], cells_[2]] = cells_
    h5 = rows["COSMOS", "cluster", "5"]
    mean = statistics.mean(h_of(5).values())
    sem = statistics.stdev(h_of(5).values()) / math.sqrt(3)
    assert h5[3] == f"{100 * mean:.2f} ± {100 * sem:.2f}"
    # against λ = 0, paired per seed: 0.6 - 0.85, 0.6 - 0.8, 0.8 - 0.9
    d, e, diffs = paired_by_hand(h_of(5), h_of(0))
    above = sum(x > 0 for x in diffs)
    assert h5[7] == f"{100 * d:+.2f} ± {100 * e:.2f} ({above} of 3 above)"
    assert rows["COSMOS", "cluster", "0"][7] == ""  # the base row itself
    # against local and COMET of the shared folder, in the same cell
    local = {s: mean_of(v) for s, v in LOCAL.items()}
    comet = {s: mean_of(v) for s, v in COMET.items()}
    for column, ref in ((8, local), (9, comet)):
        d, e, diffs = paired_by_hand(h_of(5), ref)
        above = sum(x > 0 for x in diffs)
        assert h5[column] == f"{100 * d:+.2f} ± {100 * e:.2f} ({above} of 3 above)"
    # the shared runs are one run for every λ: no difference to the base, none to themselves
    assert rows["COMET", "client", "5"][7] == "same run"
    assert rows["COMET", "client", "5"][9] == ""
    assert "COMET does not take cosmos.lam" in table
    assert (out / "ablation-cosmos.lam.png").stat().st_size > 5000


def test_report_redraws_from_assembly_yaml(split_runs, monkeypatch):
    monkeypatch.chdir(split_runs)
    args = ["report", "out", "--key", "cosmos.lam", "--cell", "0=lam0", "--cell", "5=lam5",
            "--shared", "refs", "--base", "0", "--versus", "local"]  # fmt: skip
    assert main(args) == 0
    first = (split_runs / "out" / "ablation-cosmos.lam.md").read_text()
    assert "− cosmos.lam = 0, paired" in first and "− local, paired" in first
    (split_runs / "out" / "ablation-cosmos.lam.md").unlink()
    monkeypatch.chdir(split_runs / "lam0")  # the saved folders are relative to OUT, not to here
    assert main(["report", "../out"]) == 0
    assert (split_runs / "out" / "ablation-cosmos.lam.md").read_text() == first


def test_folders_of_a_value_fill_it_in_order(split_runs):
    # λ = 5's own COSMOS runs come first; other COSMOS runs given after them for the same value
    # are not mixed in (they would be the wrong runs), and the report says so, as no cell uses
    # them; λ = 0's runs given to λ = 5 as well are used by λ = 0's cell: no note for those
    shutil.copytree(split_runs / "lam0", split_runs / "other")
    cells = [(0, split_runs / "lam0"), (5, split_runs / "lam5"), (5, split_runs / "lam0"),
             (5, split_runs / "other")]  # fmt: skip
    sweep = assemble_sweep(split_runs / "out", ["cosmos.lam"], cells, [split_runs / "refs"])
    h5 = next(
        p for p in sweep.points if p.values == {"cosmos.lam": 5} and p.model == "cluster_model"
    )
    assert h5.mean == pytest.approx(statistics.mean(h_of(5).values()))
    assert [n for n in sweep.notes if "not used" in n] == [
        f"--cell 5: COSMOS of {split_runs / 'other'} not used (a folder given before it has "
        "that algorithm)"
    ]
    assert sweep.shared == {"comet": ["cosmos.lam"], "local": ["cosmos.lam"]}


def test_two_keys_and_runs_shared_along_one(tmp_path):
    """clients x λ: COSMOS per (n, λ); `local` per n, the same runs for both λ."""
    acc = {(10, 0): 0.9, (10, 5): 0.8, (20, 0): 0.7, (20, 5): 0.6}
    for (n, lam), a in acc.items():
        for seed in (1, 2):
            final = {"cluster_model": (a, a + 0.02 * seed)}
            write_run(tmp_path / f"n{n}-lam{lam}" / "cosmos" / f"seed{seed}", "cosmos", seed,
                      final, reported="cluster_model")  # fmt: skip
    for n in (10, 20):
        for seed in (1, 2):
            write_run(tmp_path / f"n{n}-refs" / "local" / f"seed{seed}", "local", seed,
                      {"client_model": (n / 100, n / 100)})  # fmt: skip
    cells = []
    for n, lam in acc:
        cells += [([n, lam], tmp_path / f"n{n}-lam{lam}"), ([n, lam], tmp_path / f"n{n}-refs")]
    keys = ["data.num_clients", "cosmos.lam"]
    sweep = assemble_sweep(tmp_path / "out", keys, cells, [])
    assert sweep.axes == [
        {"key": "data.num_clients", "values": [10, 20]},
        {"key": "cosmos.lam", "values": [0, 5]},
    ]
    assert sweep.shared == {"local": ["cosmos.lam"]}
    lines = lines_for(sweep, "data.num_clients")
    assert [(ln.algorithm, ln.others) for ln in lines] == [
        ("cosmos", {"cosmos.lam": 0}), ("cosmos", {"cosmos.lam": 5}), ("local", {})
    ]  # fmt: skip
    h = {p.values["cosmos.lam"]: [round(q.mean, 6) for q in lines[i].points]
         for i, p in enumerate(ln.points[0] for ln in lines[:2])}  # fmt: skip
    assert h == {0: [0.915, 0.715], 5: [0.815, 0.615]}  # (a + a + 0.02 s) / 2 over s = 1, 2
    with pytest.raises(ConfigError, match="a list of 2 values"):
        assemble_sweep(tmp_path / "out", keys, [(10, tmp_path / "n10-refs")], [])


def test_sweep_report_takes_base_and_versus(lam_sweep):  # noqa: F811 (fixture)
    assert main(["report", str(lam_sweep), "--base", "cosmos.lam=5", "--versus", "local"]) == 0
    table = (lam_sweep / "ablation-cosmos.lam.md").read_text()
    row = next(
        ln for ln in table.splitlines() if ln.startswith("| COSMOS | cluster") and "| 0 |" in ln
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    d, e, diffs = paired_by_hand(h_of(0), h_of(5))
    assert cells[-2] == f"{100 * d:+.2f} ± {100 * e:.2f} ({sum(x > 0 for x in diffs)} of 3 above)"
    local = {s: mean_of(v) for s, v in LOCAL.items()}
    d, e, diffs = paired_by_hand(h_of(0), local)
    assert cells[-1] == f"{100 * d:+.2f} ± {100 * e:.2f} ({sum(x > 0 for x in diffs)} of 3 above)"


def test_differences_pair_seeds_by_number_not_position(tmp_path):
    # λ = 0 has seeds 1, 2, 3; λ = 5 only 2 and 3: the pairs are (2, 2) and (3, 3)
    for lam, seeds in ((0, {1: 0.5, 2: 0.7, 3: 0.9}), (5, {2: 0.6, 3: 0.9})):
        for seed, a in seeds.items():
            write_run(tmp_path / f"lam{lam}" / "cosmos" / f"seed{seed}", "cosmos", seed,
                      {"cluster_model": (a, a)}, reported="cluster_model")  # fmt: skip
    cells = [(0, tmp_path / "lam0"), (5, tmp_path / "lam5")]
    report = write_assembled_report(tmp_path / "out", ["cosmos.lam"], cells, [], {"cosmos.lam": 5})
    row = next(ln for ln in report.tables["cosmos.lam"].splitlines() if "| 0 |" in ln)
    d, e, _ = paired_by_hand({2: 0.7, 3: 0.9}, {2: 0.6, 3: 0.9})
    assert row.rstrip(" |").endswith(f"{100 * d:+.2f} ± {100 * e:.2f} (1 of 2 above)")


def test_numeric_values_in_order_and_only_identical_runs_shared(split_runs):
    # cells given 5 before 0; `local` is one run for both λ, COSMOS differs, COMET too (its
    # λ = 0 cell takes the runs of another folder)
    (split_runs / "refs2").mkdir()
    (split_runs / "refs" / "comet").rename(split_runs / "refs2" / "comet")
    for seed, acc in COMET.items():
        write_run(split_runs / "refs3" / "comet" / f"seed{seed}", "comet", seed,
                  {"client_model": acc})  # fmt: skip
    cells = [(5, split_runs / "lam5"), (5, split_runs / "refs2"), (0, split_runs / "lam0"),
             (0, split_runs / "refs3")]  # fmt: skip
    sweep = assemble_sweep(split_runs / "out", ["cosmos.lam"], cells, [split_runs / "refs"])
    assert sweep.axes == [{"key": "cosmos.lam", "values": [0, 5]}]
    assert sweep.shared == {"local": ["cosmos.lam"]}
    assert [p.values["cosmos.lam"] for p in lines_for(sweep, "cosmos.lam")[0].points] == [0, 5]


def test_folders_with_equals_signs_and_missing_shared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "sw" / "k.x=0" / "local" / "seed1", "local", 1, {"client_model": (1, 1)})
    assert parse_cell("0=sw/k.x=0") == (0, Path("sw/k.x=0"))
    with pytest.raises(ConfigError, match=r"no folder 'sw/k\.x=9'"):
        parse_cell("0=sw/k.x=9")
    with pytest.raises(ConfigError, match="--shared 'nowhere': no such folder"):
        assemble_sweep(
            tmp_path / "out", ["k.x"], [(0, tmp_path / "sw" / "k.x=0")], [Path("nowhere")]
        )
    with pytest.raises(ConfigError, match=r"k\.y is not a key"):
        parse_base("k.y=0", ["k.x"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--key", "cosmos.lam"], "--key and --cell go together"),
        (["--cell", "0=lam0"], "--key and --cell go together"),
        (["--key", "cosmos.lam", "--cell", "0=nowhere"], "no folder 'nowhere'"),
        (["--key", "cosmos.lam", "--cell", "lam0"], "must look like VALUE=DIR"),
        (["--key", "a/b", "--cell", "0=lam0"], "dotted name"),
        (["--key", "cosmos.lam", "--cell", "0=lam0", "--base", "3"], "not one of the values"),
        (["--key", "cosmos.lam", "--cell", "0=lam0", "--versus", "fedmd"], "no finished run of it"),
        (["--shared", "refs"], "--shared goes with --key and --cell"),
        (["--base", "1"], "apply to ablation reports"),
    ],
)
def test_bad_report_arguments_say_what_to_do(split_runs, monkeypatch, capsys, args, message):
    monkeypatch.chdir(split_runs)
    assert main(["report", "refs" if "--key" not in args else "out", *args]) != 0
    assert message in capsys.readouterr().err


def test_cell_values_parse_as_grid_values(split_runs):
    folder = split_runs / "lam0"
    assert parse_cell(f"1e-3={folder}") == (0.001, folder)
    assert parse_cell(f"{{mlp: 0.6, cnn: 0.4}}={folder}") == ({"mlp": 0.6, "cnn": 0.4}, folder)
    assert parse_cell(f"null={folder}") == (None, folder)
    assert parse_base("cosmos.lam=5", ["cosmos.lam"]) == {"cosmos.lam": 5}
    with pytest.raises(ConfigError, match="several keys"):
        parse_base("5", ["cosmos.lam", "rounds"])
