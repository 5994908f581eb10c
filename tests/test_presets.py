"""Presets (cosmosfl.presets): configs/ shipped inside the package, listed and found by name.
The command line's `--preset` and `cosmosfl presets`: tests/cli/test_presets.py."""

from pathlib import Path

import pytest

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
