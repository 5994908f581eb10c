"""`cosmosfl flower app`: the pyproject.toml of the Flower app is valid for Flower, declares every
run-config key the apps read, and examples/flower/pyproject.toml is what the generator writes."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.settings import AppSettings
from cosmosfl.experiment.config import load_config


def test_app_pyproject_is_valid_for_flower_and_the_example_is_current(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import tomllib

    from flwr.common.config import validate_config

    from cosmosfl.apps.flower.settings import DEFAULTS
    from cosmosfl.cli.main import main

    repo = Path(__file__).resolve().parents[3]
    default = str(repo / "configs" / "default.yaml")
    assert main(["flower", "app", "-c", default, "--dir", str(tmp_path)]) == 0
    written = (tmp_path / "pyproject.toml").read_text()
    config = tomllib.loads(written)
    ok, errors, _ = validate_config(config, check_module=True, project_dir=tmp_path)
    assert ok, errors
    run_config = config["tool"]["flwr"]["app"]["config"]
    assert set(run_config) == set(DEFAULTS)  # every key the apps read is declared
    assert (
        load_config("configs/default.yaml")
        == AppSettings.from_run_config(run_config).experiment_config()
    )
    example = repo / "examples" / "flower" / "pyproject.toml"
    assert example.read_text() == written, (
        "examples/flower/pyproject.toml is stale: rerun "
        "`cosmosfl flower app -c configs/default.yaml --dir examples/flower`"
    )
