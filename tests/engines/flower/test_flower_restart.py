"""A killed ServerApp: Flower runs are not resumable (the clients' trained states live in the
dead run's node contexts), so a restart is refused over the cut-short run directory, and with
`force` it starts cleanly from round 1, its clients at their initial states, and gives the
records of an uninterrupted run."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.client_app import make_client_app
from cosmosfl.apps.flower.server_app import run_on_grid
from cosmosfl.apps.flower.settings import AppSettings
from cosmosfl.engines.progress import SilentReporter
from cosmosfl.experiment.config import ConfigError, dump_config, load_config
from cosmosfl.experiment.rundir import read_records, read_summary
from cosmosfl.experiment.runner import run_experiment

from .loopback import LoopbackGrid, ServerGrid
from .test_flower_engine import SMALL
from .test_flower_faults import assert_same_records


class Killed(BaseException):
    """The ServerApp's process dies (nothing in it may catch this)."""


class KilledInRound(ServerGrid):
    def __init__(self, grid: LoopbackGrid, round_num: int) -> None:
        super().__init__(grid)
        self.kill_round = str(round_num)

    def send_and_receive(self, messages, *, timeout=None):  # type: ignore[no-untyped-def]
        messages = list(messages)
        if any(m.metadata.group_id == self.kill_round for m in messages):
            raise Killed
        return super().send_and_receive(messages, timeout=timeout)


def test_a_killed_serverapp_is_refused_over_its_run_then_restarts_cleanly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(None, SMALL)
    inproc = run_experiment(cfg, tmp_path / "sim", progress=False).records
    out = tmp_path / "flower"

    def settings(force: bool) -> AppSettings:
        return AppSettings(dump_config(cfg), str(out), force, 30.0, 5.0)

    def new_flower_run() -> LoopbackGrid:  # a new Flower run: fresh node contexts
        return LoopbackGrid(make_client_app(settings(False)), cfg.data.num_clients)

    with pytest.raises(Killed):
        run_on_grid(
            KilledInRound(new_flower_run(), 2), cfg, settings(False), reporter=SilentReporter()
        )
    assert_same_records(read_records(out), inproc[:1])  # round 1 was recorded, then the kill
    assert not (out / "summary.json").exists() and not (out / "checkpoint.pt").exists()

    with pytest.raises(ConfigError, match=r"cut short after 1 recorded round.*force"):
        run_on_grid(ServerGrid(new_flower_run()), cfg, settings(False), reporter=SilentReporter())
    assert len(read_records(out)) == 1  # the refused restart touched nothing

    summary = run_on_grid(
        ServerGrid(new_flower_run()), cfg, settings(True), reporter=SilentReporter()
    )
    assert_same_records(read_records(out), inproc)  # round 1 again, from the initial states
    assert read_summary(out)["engine"] == summary["engine"] == "flower"
