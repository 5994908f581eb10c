"""benchmarks/reference.py (cosmosfl beside the official COSMOS code): without the official
checkout or its interpreter it says why in one line and exits with status 3, writing nothing;
its tables are built from the records both sides write. The run itself needs the official
code and takes ~25 minutes (benchmarks/README.md, "reference")."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def no_reference_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COSMOSFL_REF_DIR", raising=False)
    monkeypatch.delenv("COSMOSFL_REF_PYTHON", raising=False)


def _fake_checkout(tmp_path: Path) -> Path:
    ref = tmp_path / "cfl"
    ref.mkdir()
    for name in ("main_.py", "entities.py"):
        (ref / name).write_text("")
    return ref


@pytest.mark.usefixtures("no_reference_env")
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("nothing", "no official checkout"),
        ("not a checkout", "is not a checkout of the official code"),
        ("no interpreter", "no interpreter for the official code"),
        ("missing interpreter", "is not an executable"),
        ("interpreter without its packages", "cannot import what the official code needs"),
    ],
)
def test_skips_with_one_line_and_status_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, expected: str
) -> None:
    reference = _load("reference")
    out = tmp_path / "out"
    args = ["--out", str(out)]
    if case == "not a checkout":
        args += ["--ref-dir", str(tmp_path)]
    elif case != "nothing":
        args += ["--ref-dir", str(_fake_checkout(tmp_path))]
    if case == "missing interpreter":
        args += ["--ref-python", str(tmp_path / "no-python")]
    elif case == "interpreter without its packages":
        args += ["--ref-python", "/bin/false"]
    assert reference.main(args) == reference.EXIT_SKIPPED == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reference benchmark skipped:")
    assert expected in err[0]
    assert not out.exists()  # nothing written, nothing fetched


@pytest.mark.usefixtures("no_reference_env")
def test_skip_is_the_exit_status_of_the_script(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "reference.py"), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert "reference benchmark skipped: no official checkout" in done.stderr
    assert not (tmp_path / "out").exists()


def _official_round(t: int, acc: float, clusters: dict | None = None) -> dict:
    seconds = {"local": 10.0, "prediction": 1.0, "client_distillation": 20.0 if t else 0.0,
               "client_total": 40.0 if t else 20.0, "server_total": 15.0,
               "server_evaluation": 5.0, "client_evaluation": 9.0,
               "round": 56.0 if t else 36.0}  # fmt: skip
    per_client = {str(c): acc * 100 for c in range(4)}
    return {"round": t, "setup_seconds": 3.0, "seconds": seconds, "calls": {"local": 4},
            "server_accuracy_per_client_1": per_client,
            "server_accuracy_per_client_1_max": per_client,
            "client_accuracy_per_client_1": per_client, "beta": 7.3, "num_clusters": 2,
            "clusters": clusters}  # fmt: skip


def _cosmosfl_round(t: int, acc: float) -> dict:
    seconds = {
        "local_training": 5.0,
        "prediction": 0.5,
        "clustering": 0.1,
        "server_distillation": 4.0,
        "client_distillation": 10.0,
        "evaluation": 1.0,
    }
    return {"round": t, "wall": 21.0, "seconds": seconds, "K": 2, "threshold": 0.71,
            "clusters": {"0": 0, "1": 0, "2": 1, "3": 1},
            "mean_accuracy": {"cluster_model": acc, "local": acc, "client_model": acc}}  # fmt: skip


def test_tables_from_both_records() -> None:
    report = _load("reference_report")
    official = [_official_round(0, 0.5, {"0": [0, 1], "1": [2, 3]}), _official_round(1, 0.6)]
    ours = [_cosmosfl_round(1, 0.55), _cosmosfl_round(2, 0.7)]
    # The official first round has no client distillation: the per-round figure is the mean
    # over the rounds in which a phase ran.
    phases = report.per_round([report.official_phases(r) for r in official])
    assert phases["client distillation"] == 20.0 and phases["server"] == 10.0
    assert phases["evaluation"] == 14.0 and phases["local"] == 10.0
    result = {
        "split": {"client_group": [0, 0, 1, 1]},
        "same_work": {
            "official_rounds": official,
            "cosmosfl_rounds": ours,
            "official_ready": {"torch": "2.14.1"},
            "alexnet_step_seconds": {"official": [1.0, 1.2], "cosmosfl": [1.0, 1.1]},
            "alexnet_parameters": {"official": 5, "cosmosfl": 5, "same_shapes": True},
        },
        "time_to_accuracy": {
            "target": 0.6, "official_round": 2, "official_seconds": 95.0, "config": "x.yaml",
            "cosmosfl_rounds": [{"round": 1, "seconds": 9.5, "cluster_model": 0.62, "K": 2}],
            "cosmosfl_reached": True, "cosmosfl_seconds": 9.5, "ratio": 10.0,
            "official_cpu_seconds": 90.0, "cosmosfl_cpu_seconds": 9.0, "cpu_ratio": 10.0,
        },
    }  # fmt: skip
    text = report.render(result)
    assert "| client distillation | 20.0 | 10.0 | 2.00x |" in text
    assert "| 2 | 0.600 | 0.600 | 0.700 | 0.600 | 0.700 |" in text
    assert "clusters [[0, 1], [2, 3]]" in text and "K = 2" in text
    assert "Time-to-accuracy ratio (official / cosmosfl): 10.0x wall, 10.0x process CPU." in text
