"""The cosmosfl ServerApp: builds the algorithm from a cosmosfl config and drives it over
Flower's Grid with `FlowerFederation`, writing the same run directory as `cosmosfl run`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from cosmosfl.apps.flower.grid import PromptGrid
from cosmosfl.apps.flower.settings import AppSettings
from cosmosfl.engines.flower.federation import FlowerFederation
from cosmosfl.engines.progress import Reporter, summary_line
from cosmosfl.experiment.config import ConfigError, ExperimentConfig
from cosmosfl.experiment.loop import RoundCallback
from cosmosfl.experiment.result import RunResult
from cosmosfl.experiment.rundir import METRICS, RunDirectory

GridHook = Callable[[Grid], Grid]
"""Wraps the Grid before use (tests record the messages that cross it)."""


class LogReporter(Reporter):
    """One line per round and every log line, on stdout (Flower collects the ServerApp's)."""

    def round_end(self, record: dict[str, Any]) -> None:
        print(summary_line(record), flush=True)

    def log(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)


def refuse_interrupted(out: str | Path, force: bool) -> None:
    """Refuse to start over a run directory that holds a Flower run cut short, unless `force`.

    A Flower run is not checkpointed and cannot be resumed: its clients' trained states live in
    Flower's per-run node contexts, which die with the run, so a restarted ServerApp (a new
    Flower run) starts every client from its initial state and must start at round 1
    (docs/flower.md, "A killed ServerApp"). Starting over would silently discard the rounds the
    directory records; `force` says that is meant."""
    path = Path(out)
    metrics = path / METRICS
    if force or RunDirectory(path).finished or not metrics.is_file():
        return
    rounds = sum(1 for line in metrics.read_text().splitlines() if line.strip())
    if rounds:
        raise ConfigError(
            f"{path} holds a Flower run that was cut short after {rounds} recorded round(s) "
            "(no summary.json). Flower runs cannot be resumed (the clients' trained states "
            "were lost with that run, see docs/flower.md): start it over from round 1 with "
            "force (--force, or --run-config 'force=true'), or choose another out"
        )


class FlowerSummary(RoundCallback):
    """The Flower engine's additions to summary.json, made before it is written: which
    clients never connected, what sites said at discovery, round trips per round."""

    def __init__(self, cfg: ExperimentConfig, engines: list[FlowerFederation]) -> None:
        self.cfg, self.engines = cfg, engines

    def run_end(self, result: RunResult, summary: dict[str, Any]) -> None:
        summary["engine"] = "flower"
        if self.engines:
            engine = self.engines[0]
            summary["clients_never_connected"] = engine.unconnected
            if self.cfg.sites.public is not None:  # sites: what each said at discovery
                summary["clients_refused"] = {str(c): r for c, r in engine.refused.items()}
                summary["client_models"] = {
                    str(c): m for c, m in sorted(engine.client_models.items())
                }
        summary["round_trips_per_round"] = float(
            np.mean([r.get("round_trips", 0) for r in result.records])
        )


def run_on_grid(
    grid: Grid,
    cfg: ExperimentConfig,
    settings: AppSettings,
    *,
    reporter: Reporter | None = None,
) -> dict[str, Any]:
    """Run `cfg` over `grid` through `run_experiment`'s loop (experiment/loop.py) with the
    Flower engine; returns the summary (also written to `settings.out` if set)."""
    from cosmosfl.experiment.runner import engine_options, run_experiment

    if settings.out:
        refuse_interrupted(settings.out, settings.force)
    grid = grid if isinstance(grid, PromptGrid) else PromptGrid(grid)

    engines: list[FlowerFederation] = []

    def make_engine(exp: Any, rep: Reporter) -> FlowerFederation:
        fed = FlowerFederation(
            grid,
            exp.public_x,
            exp.num_classes,
            expected_clients=exp.client_ids,
            seed=cfg.seed,
            device=cfg.device,
            reporter=rep,
            reply_timeout=settings.reply_timeout,
            discovery_timeout=settings.discovery_timeout,
            options=engine_options(cfg),
        )
        fed.connect()
        engines.append(fed)
        return fed

    result = run_experiment(
        cfg,
        settings.out or None,
        progress=reporter or LogReporter(),
        force=settings.force,
        engine=make_engine,
        callbacks=[FlowerSummary(cfg, engines)],
    )
    assert result.summary is not None
    return dict(result.summary)


def make_server_app(
    settings: AppSettings | None = None,
    *,
    grid_hook: GridHook | None = None,
    on_summary: Callable[[dict[str, Any]], None] | None = None,
) -> ServerApp:
    """A ServerApp (the module's `app` reads its settings from the run config); `settings`
    replace the run config (Python-driven simulation, tests)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        s = settings or AppSettings.from_run_config(context.run_config)
        cfg = s.experiment_config()
        summary = run_on_grid(grid_hook(grid) if grid_hook else grid, cfg, s)
        if on_summary is not None:
            on_summary(summary)

    return app


app = make_server_app()
