"""Write the pyproject.toml of a Flower app that runs cosmosfl's ServerApp and ClientApp.

The app directory holds nothing else: the apps are imported from the installed cosmosfl
package. Every run-config key the apps read is declared here (Flower rejects overrides of
undeclared keys with only "Invalid run configuration").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cosmosfl import __version__
from cosmosfl.apps.flower.settings import DEFAULTS
from cosmosfl.experiment.config import ExperimentConfig, dump_config

SERVER_APP = "cosmosfl.apps.flower.server_app:app"
CLIENT_APP = "cosmosfl.apps.flower.client_app:app"


def app_pyproject(cfg: ExperimentConfig | None = None, **run_config: Any) -> dict[str, Any]:
    """The app's pyproject as data; `cfg` is embedded as YAML (None: the built-in defaults)."""
    config = {**DEFAULTS, **{k.replace("_", "-"): v for k, v in run_config.items()}}
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown run-config key(s) {unknown}; allowed: {sorted(DEFAULTS)}")
    if cfg is not None:
        config["config"] = dump_config(cfg)
    return {
        "project": {
            "name": "cosmosfl-app",
            "version": __version__,
            "description": "cosmosfl algorithms on Flower (apps imported from cosmosfl)",
            "license": "MIT",
            "dependencies": ["flwr[simulation]>=1.42,<1.43", f"cosmosfl=={__version__}"],
        },
        "tool": {
            "flwr": {
                "app": {
                    "publisher": "cosmosfl",
                    "components": {"serverapp": SERVER_APP, "clientapp": CLIENT_APP},
                    "config": config,
                }
            }
        },
    }


def write_app(
    directory: str | Path, cfg: ExperimentConfig | None = None, **run_config: Any
) -> Path:
    """Write `directory/pyproject.toml` for `cfg`; returns its path."""
    import tomli_w

    path = Path(directory) / "pyproject.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# A Flower app running cosmosfl (written by `cosmosfl flower app`; see docs/flower.md).\n"
        "# Run-config keys: config (cosmosfl YAML), out (run directory on the SuperLink's\n"
        "# machine), force, reply-timeout, discovery-timeout (seconds).\n"
    )
    path.write_text(
        header + tomli_w.dumps(app_pyproject(cfg, **run_config), multiline_strings=True)
    )
    return path
