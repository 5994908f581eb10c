"""The run configuration a cosmosfl Flower app reads (declared in the app's pyproject.toml).

Flower rejects run-config overrides for keys the app's pyproject does not declare, so every
key here is written by `write_app_pyproject` with its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cosmosfl.experiment.config import ConfigError, ExperimentConfig, config_from_dict

DEFAULTS: dict[str, Any] = {
    # The cosmosfl experiment config as YAML text (empty: the built-in defaults).
    "config": "",
    # Run directory written by the ServerApp (on the SuperLink's machine); empty: none.
    "out": "",
    # Overwrite a finished run directory.
    "force": False,
    # Seconds to wait for one message's reply; also the message's TTL, so a late message
    # never runs in a later step.
    "reply-timeout": 600.0,
    # Seconds to wait for all clients of the config to connect before starting with those
    # that did (at least one).
    "discovery-timeout": 300.0,
}


@dataclass(frozen=True)
class AppSettings:
    config_text: str
    out: str
    force: bool
    reply_timeout: float
    discovery_timeout: float

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, Any]) -> AppSettings:
        values = {**DEFAULTS, **dict(run_config)}
        for key in ("reply-timeout", "discovery-timeout"):
            if not float(values[key]) > 0:
                raise ConfigError(f"run config {key} = {values[key]!r} must be > 0 (seconds)")
        return cls(
            config_text=str(values["config"]),
            out=str(values["out"]),
            force=bool(values["force"]),
            reply_timeout=float(values["reply-timeout"]),
            discovery_timeout=float(values["discovery-timeout"]),
        )

    def experiment_config(self) -> ExperimentConfig:
        import yaml

        raw = yaml.safe_load(self.config_text) if self.config_text.strip() else {}
        if not isinstance(raw, dict):
            raise ConfigError("run config 'config' must hold a YAML mapping (a cosmosfl config)")
        return config_from_dict(raw)


def partition_id(node_config: Mapping[str, Any]) -> int:
    """The stable client id a SuperNode serves: its node config's `partition-id`."""
    if "partition-id" not in node_config:
        raise ConfigError(
            "this SuperNode has no partition-id; start it with "
            "--node-config 'partition-id=<client id> num-partitions=<clients>'"
        )
    return int(node_config["partition-id"])
