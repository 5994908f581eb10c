"""One version everywhere: pyproject.toml, the installed metadata, `cosmosfl --version`."""

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import cosmosfl

ROOT = Path(__file__).resolve().parents[1]
DECLARED = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_version_is_0_2_0_from_package_metadata():
    assert DECLARED == "0.2.0"
    assert cosmosfl.__version__ == metadata.version("cosmosfl") == DECLARED


def test_cli_prints_the_version():
    proc = subprocess.run(
        [sys.executable, "-m", "cosmosfl.cli.main", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"cosmosfl {DECLARED}"


def test_uninstalled_checkout_reads_pyproject(monkeypatch):
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert cosmosfl._version() == DECLARED


def test_changelog_has_this_version():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{DECLARED}]" in changelog
    assert "## [0.1.0]" in changelog
