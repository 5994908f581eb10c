"""`cosmosfl presets` and the `--preset NAME` option (cli/presets.py): a preset resolves like
its config file, its errors are one line, and the command lists and prints the presets."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cosmosfl.cli.main import main
from cosmosfl.presets import list_presets

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


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
