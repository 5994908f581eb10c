"""The Flower ServerApp runs through the one run loop (experiment/loop.py) that `simulate`
and `cosmosfl run` take (tests/experiment/test_loop.py), over a loopback Grid."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.client_app import make_client_app
from cosmosfl.apps.flower.server_app import run_on_grid
from cosmosfl.apps.flower.settings import AppSettings
from cosmosfl.engines.progress import SilentReporter
from cosmosfl.experiment import runner
from cosmosfl.experiment.config import dump_config, load_config
from cosmosfl.experiment.loop import run_loop
from cosmosfl.experiment.rundir import read_summary

from .loopback import LoopbackGrid, ServerGrid
from .test_flower_engine import SMALL


def test_the_serverapp_goes_through_the_one_loop(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []

    def spy(algorithm: Any, rounds: int, **kwargs: Any) -> Any:
        calls.append(algorithm.name)
        return run_loop(algorithm, rounds, **kwargs)

    monkeypatch.setattr(runner, "run_loop", spy)
    cfg = load_config(None, SMALL)
    out = tmp_path / "flower"
    settings = AppSettings(dump_config(cfg), str(out), True, 30.0, 5.0)
    grid = ServerGrid(LoopbackGrid(make_client_app(settings), cfg.data.num_clients))
    summary = run_on_grid(grid, cfg, settings, reporter=SilentReporter())
    assert calls == ["cosmos"]
    # The engine's fields come from a round callback before summary.json is written, once.
    assert read_summary(out) == summary and summary["engine"] == "flower"
    assert summary["clients_never_connected"] == [] and summary["round_trips_per_round"] > 0
