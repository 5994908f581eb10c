"""The keys of a config file and which of them identify a run: the top-level names (run
settings and sections), the sections that only say where a run is logged, and a config as the
plain, dotted data that compare, sweep and resume match finished runs by."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosmosfl.experiment.schema import ExperimentConfig

# The top-level run settings of a config file (its sections are the other TOP_LEVEL names).
RUN_SETTINGS = (
    "seed",
    "rounds",
    "device",
    "threads",
    "workers",
    "min_participation",
    "max_payload_bytes",
)
TOP_LEVEL = (
    *RUN_SETTINGS,
    "data",
    "clients",
    "algorithm",
    "faults",
    "tracking",
    "sites",
    "privacy",
)
# Sections that say where a run is logged, not what it computes: a finished run whose config
# differs only here is the same experiment (compare/sweep skip it) and can be resumed.
NOT_IDENTITY = ("tracking",)


def identity(cfg: ExperimentConfig | dict[str, Any]) -> dict[str, Any]:
    """The config as plain data without the sections of NOT_IDENTITY."""
    raw = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg)
    return {k: v for k, v in raw.items() if k not in NOT_IDENTITY}


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config data as dotted keys (`data.num_clients`); `clients.models` stays whole."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and name != "clients.models":
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out
