"""A user's algorithm, defined outside the package (tests/toy_algorithm.py), runs through
`cosmosfl run`, `compare` and `sweep` once registered, with no edit to cosmosfl: from Python
(`register_algorithm`, undone after each test) and from the shell (an installed package's
`cosmosfl.algorithms` entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cosmosfl.algorithms import ALGORITHMS, register_algorithm, unregister_algorithm
from cosmosfl.algorithms.registry import ENTRY_POINT_GROUP
from cosmosfl.cli.main import main

from .toy_algorithm import ToyMean

SRC = Path(__file__).resolve().parents[1] / "src"
CONFIG = {
    "rounds": 1,
    "threads": 1,
    "data": {"num_clients": 4, "num_groups": 2},
    "clients": {"models": {"mlp": 1}},
    "algorithm": {"name": "toymean", "pretrain_epochs": 1, "local_epochs": 1, "sharpen": 2.0},
}


@pytest.fixture
def toymean():
    """ToyMean registered for one test; the registry is as it was afterwards."""
    register_algorithm(ToyMean)
    yield ToyMean
    unregister_algorithm(ToyMean.name)
    assert "toymean" not in ALGORITHMS


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "toymean.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return path


def test_compare_runs_a_registered_algorithm_beside_a_shipped_one(toymean, config_file, tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", "-c", str(config_file), "-a", "toymean,local", "-o", str(out), "-q"]
    assert main(args) == 0
    summary = json.loads((out / "toymean" / "seed1" / "summary.json").read_text())
    assert summary["algorithm"] == "toymean" and summary["reported_model"] == "client_model"
    assert "sharpen: 2.0" in (out / "toymean" / "seed1" / "config.yaml").read_text()
    # The shared epochs travel from the base algorithm section to the shipped baseline.
    local = yaml.safe_load((out / "local" / "seed1" / "config.yaml").read_text())["algorithm"]
    assert (local["pretrain_epochs"], local["local_epochs"]) == (1, 1)
    table = (out / "table.md").read_text()
    assert "| ToyMean |" in table and "| local (reference) |" in table


def test_run_and_sweep_take_it_too(toymean, config_file, tmp_path):
    assert main(["run", "-c", str(config_file), "-o", str(tmp_path / "run"), "-q"]) == 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["algorithm"] == "toymean"
    out = tmp_path / "sweep"
    args = ["sweep", "-c", str(config_file), "--grid", "toymean.sharpen=1,2", "-a", "toymean"]
    assert main([*args, "-o", str(out), "-q"]) == 0
    assert len(list(out.rglob("toymean/seed1/summary.json"))) == 2


def test_an_unregistered_name_is_a_user_error(config_file, capsys):
    assert main(["run", "-c", str(config_file), "-q"]) == 2
    assert "algorithm.name = 'toymean' is not known" in capsys.readouterr().err


def test_cosmosfl_run_from_the_shell_finds_an_installed_packages_entry_point(config_file, tmp_path):
    """What `pip install` of a package declaring the algorithm leaves on sys.path: its module
    and a dist-info whose entry_points.txt names the class in the `cosmosfl.algorithms` group."""
    site = tmp_path / "site-packages"
    site.mkdir()
    toy = Path(__file__).with_name("toy_algorithm.py").read_text()
    (site / "my_algorithms.py").write_text(toy)
    info = site / "my_algorithms-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-algorithms\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntoymean = my_algorithms:ToyMean\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(SRC)])}
    out = tmp_path / "run"
    command = ["run", "-c", str(config_file), "-o", str(out), "-q"]
    proc = subprocess.run(
        [sys.executable, "-m", "cosmosfl.cli.main", *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "toymean" and "toymean" not in ALGORITHMS
