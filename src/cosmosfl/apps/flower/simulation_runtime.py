"""Run a cosmosfl config on Flower's simulation runtime from Python (no SuperLink, no pyproject).

Flower's simulation runtime runs the real ServerApp and ClientApps, one virtual SuperNode per
client, on Ray; it is not cosmosfl's own in-process engine (`cosmosfl.engines.simulation`,
`InProcessEngine`), which `cosmosfl run` uses.

`flwr run` against a SuperLink started with `--simulation` runs the same apps (docs/flower.md);
this entry point is what `cosmosfl flower simulate` and the tests use.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from cosmosfl.apps.flower.client_app import ClientHook, make_client_app
from cosmosfl.apps.flower.server_app import GridHook, make_server_app
from cosmosfl.apps.flower.settings import DEFAULTS, AppSettings
from cosmosfl.experiment.config import ExperimentConfig, dump_config


def quiet_flower_environment() -> None:
    """No telemetry, no update check, one thread per client process (many on few cores)."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def simulate_on_flower(
    cfg: ExperimentConfig,
    out: str | Path | None = None,
    *,
    force: bool = False,
    reply_timeout: float = float(DEFAULTS["reply-timeout"]),
    num_cpus: int | None = None,
    client_hook: ClientHook | None = None,
    grid_hook: GridHook | None = None,
) -> dict[str, Any]:
    """Run `cfg` with one virtual SuperNode per client on Flower's simulation runtime (Ray);
    returns the run summary (and writes the run directory `out`)."""
    quiet_flower_environment()
    from flwr.simulation import run_simulation

    settings = AppSettings(
        config_text=dump_config(cfg),
        out=str(Path(out).resolve()) if out is not None else "",
        force=force,
        reply_timeout=reply_timeout,
        discovery_timeout=float(DEFAULTS["discovery-timeout"]),
    )
    summaries: list[dict[str, Any]] = []
    server = make_server_app(settings, grid_hook=grid_hook, on_summary=summaries.append)
    client = make_client_app(settings, hook=client_hook)
    cpus = num_cpus or min(os.cpu_count() or 1, cfg.data.num_clients)
    backend = {
        "init_args": {"num_cpus": cpus, "include_dashboard": False},
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(server, client, cfg.data.num_clients, backend_config=backend)
    if not summaries:
        raise RuntimeError("the Flower simulation ended without a result (see the log above)")
    return summaries[0]
