"""The built wheel works without a checkout: installed into a fresh venv outside the repository,
its `cosmosfl` runs the built-in default and a shipped preset.

Slow (a build, a venv and two short runs: about 2-4 minutes on 2 cores), so excluded from the
default selection; `.ci/run` runs it as its own step: `pytest -m slow tests/test_wheel.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# The CPU build of torch first, so resolving the wheel's `torch>=2.2` never pulls a CUDA build.
TORCH = os.environ.get("COSMOSFL_TEST_TORCH", "torch==2.13.0")
QUICK = [
    "rounds=1",
    "algorithm.pretrain_epochs=1",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
]

pytestmark = pytest.mark.slow


def run(*args: str | Path, cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """(bin folder of a fresh venv with the built wheel installed, a work folder, its env)."""
    tmp = tmp_path_factory.mktemp("wheel")
    assert not tmp.resolve().is_relative_to(ROOT), "the venv must lie outside the checkout"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["COLUMNS"] = "100"
    dist = tmp / "dist"
    run(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=tmp, env=env)
    wheels = sorted(dist.glob(f"cosmosfl-{VERSION}-py3-none-any.whl"))
    assert len(wheels) == 1 and sorted(dist.glob(f"cosmosfl-{VERSION}.tar.gz"))
    venv.EnvBuilder(with_pip=True, clear=True).create(tmp / "venv")
    bin_dir = tmp / "venv" / "bin"
    pip = [bin_dir / "python", "-m", "pip", "install", "--quiet"]
    run(*pip, TORCH, cwd=tmp, env=env)
    run(*pip, wheels[0], cwd=tmp, env=env)
    work = tmp / "work"
    work.mkdir()
    return bin_dir, work, env


def test_installed_package_is_the_wheel_not_the_checkout(installed):
    bin_dir, work, env = installed
    where = run(
        bin_dir / "python", "-c", "import cosmosfl; print(cosmosfl.__file__)", cwd=work, env=env
    ).strip()
    assert (bin_dir.parent / "lib").resolve() in Path(where).resolve().parents
    assert run(bin_dir / "cosmosfl", "--version", cwd=work, env=env).strip() == (
        f"cosmosfl {VERSION}"
    )


def test_presets_are_listed_and_printed(installed):
    bin_dir, work, env = installed
    listing = run(bin_dir / "cosmosfl", "presets", cwd=work, env=env)
    names = {line.split()[0] for line in listing.splitlines() if line and line[0] != " "}
    assert {"default", "cifar10-cpu", "paper-cifar10", "paper-tiny-imagenet"} <= names
    text = run(bin_dir / "cosmosfl", "presets", "default", cwd=work, env=env)
    assert text == (ROOT / "configs" / "default.yaml").read_text()


def test_run_on_the_built_in_default(installed):
    bin_dir, work, env = installed
    out = run(bin_dir / "cosmosfl", "run", "--quiet", "--out", "builtin", *QUICK, cwd=work, env=env)
    assert "reported" in out
    summary = json.loads((work / "builtin" / "summary.json").read_text())
    assert summary["rounds"] == 1 and summary["algorithm"] == "cosmos"


def test_run_a_shipped_preset(installed):
    bin_dir, work, env = installed
    out = run(
        bin_dir / "cosmosfl", "run", "--preset", "default", "--quiet", "--out", "preset", *QUICK,
        cwd=work, env=env,
    )  # fmt: skip
    assert "reported" in out
    config = (work / "preset" / "config.yaml").read_text()
    assert "dataset: digits" in config and "logistic_regression" in config  # the preset's mix
    records = (work / "preset" / "metrics.jsonl").read_text().splitlines()
    assert len(records) == 1 and json.loads(records[0])["K"] >= 1
