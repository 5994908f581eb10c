"""Presets: configs/ shipped inside the package, listed and run by name."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cosmosfl.cli.main import main
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.presets import list_presets, preset_path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"


def test_shipped_presets_are_the_checkout_configs():
    shipped = {p.name: p.path.read_bytes() for p in list_presets()}
    configs = {p.stem: p.read_bytes() for p in CONFIGS.glob("*.yaml")}
    assert set(shipped) == set(configs), "run `make presets` to copy configs/ into the package"
    differ = sorted(name for name in configs if shipped[name] != configs[name])
    assert not differ, f"presets {differ} differ from configs/: run `make presets`"


def test_every_preset_is_a_valid_config_with_a_summary():
    presets = list_presets()
    assert [p.name for p in presets] == sorted(p.name for p in presets)
    assert {"default", "cifar10-cpu", "paper-cifar10"} <= {p.name for p in presets}
    for p in presets:
        load_config(p.path)  # validated like any config file
        assert p.summary.endswith(".") and "\n" not in p.summary, p.name
        assert not p.summary.startswith("#"), p.name
    default = next(p for p in presets if p.name == "default")
    assert default.summary.startswith("COSMOS on scikit-learn's digits")


def test_unknown_preset_names_the_available_ones():
    with pytest.raises(ConfigError) as err:
        preset_path("cifar11")
    for p in list_presets():
        assert p.name in str(err.value)
    with pytest.raises(ConfigError):
        preset_path("../configs/default")


def test_preset_resolves_like_the_config_file(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["show-config", "--preset", "cifar10-cpu", "rounds=2"]) == 0
    by_preset = capsys.readouterr().out
    assert main(["show-config", "-c", "configs/cifar10-cpu.yaml", "rounds=2"]) == 0
    assert by_preset == capsys.readouterr().out
    assert "dataset: cifar10" in by_preset and "rounds: 2" in by_preset


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--preset", "nope"], "unknown preset 'nope'; available presets: "),
        (["compare", "--preset", "nope"], "unknown preset 'nope'"),
        (["sweep", "--preset", "nope", "--grid", "seed=1,2"], "unknown preset 'nope'"),
        (["partition", "-p", "nope"], "unknown preset 'nope'"),
        (["run", "--preset", "default", "-c", "configs/default.yaml"], "not both"),
        (["run", "--resume", "runs/x", "--preset", "default"], "remove --preset"),
    ],
)
def test_preset_errors_are_one_line(args, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_presets_command_lists_and_prints():
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cosmosfl.cli.main", "presets", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "80"},
        )

    listing = cli()
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    for p in list_presets():
        assert any(line.startswith(f"{p.name} ") for line in lines), p.name
    assert max(len(line) for line in lines) <= 80
    assert "cosmosfl run --preset NAME" in listing.stdout
    shown = cli("paper-cifar10")
    assert shown.returncode == 0
    assert shown.stdout == (CONFIGS / "paper-cifar10.yaml").read_text()
