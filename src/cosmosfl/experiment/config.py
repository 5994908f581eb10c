"""The experiment config: reading, validation and `key=value` overrides.

A config is three sections (`data`, `clients`, `algorithm`) plus run settings. Every key is
checked before any training starts: unknown keys and bad values are rejected with the field,
the value and what is allowed. The sections' dataclasses, with the constraints and rules of
their values, are in schema.py (its names are importable from here); `check_values` runs them
with the one mechanism the algorithms use (core/constraints.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.core.constraints import check_parameters, check_rules
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.experiment.algorithm_section import (
    AlgorithmSection,
    algorithm_options,
    reference_runs,
    settings_class,
    validate_algorithm,
)
from cosmosfl.experiment.config_keys import (
    NOT_IDENTITY,
    RUN_SETTINGS,
    TOP_LEVEL,
    flatten,
    identity,
)
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.model_spec import parse_models
from cosmosfl.experiment.schema import (
    ClientsConfig,
    DataConfig,
    ExperimentConfig,
    PrivacyConfig,
    SitesConfig,
    TrackingConfig,
)
from cosmosfl.experiment.value_types import build_section, check_keys
from cosmosfl.experiment.yamlio import load_yaml

__all__ = [
    "NOT_IDENTITY",
    "RUN_SETTINGS",
    "TOP_LEVEL",
    "AlgorithmSection",
    "ClientsConfig",
    "ConfigError",
    "DataConfig",
    "ExperimentConfig",
    "PrivacyConfig",
    "SitesConfig",
    "TrackingConfig",
    "algorithm_options",
    "apply_overrides",
    "changed_default_notices",
    "check_values",
    "config_from_dict",
    "dump_config",
    "flatten",
    "identity",
    "load_config",
    "parse_override",
    "read_config_file",
    "reference_runs",
    "settings_class",
    "validate_algorithm",
]


def config_from_dict(raw: dict[str, Any]) -> ExperimentConfig:
    """Validate a plain dict (e.g. parsed YAML) into an ExperimentConfig: `load_config(raw)`."""
    if not isinstance(raw, dict):  # e.g. an empty YAML document (None): not the defaults
        raise ConfigError(f"a config must be a mapping, got {type(raw).__name__}")
    return load_config(raw)


def check_values(cfg: ExperimentConfig) -> None:
    """Every value of `cfg` against its section's `parameter_constraints` (the run settings
    first), then every section's `parameter_rules`, the ones across sections last (schema.py);
    then the models' specs. Types are checked already; `faults` checks itself when built."""
    parts = [
        ("", cfg),
        ("data", cfg.data),
        ("tracking", cfg.tracking),
        ("clients", cfg.clients),
        ("sites", cfg.sites),
        ("privacy", cfg.privacy),
    ]
    try:
        for prefix, part in parts:
            check_parameters(type(part), vars(part), prefix)
        for _, part in [*parts[1:], parts[0]]:
            check_rules(part)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    # Names importable, arguments accepted, weights positive; kept, so the build parses no more.
    cfg.clients.model_specs = parse_models(cfg.clients.models)


def changed_default_notices(algorithm: dict[str, Any]) -> list[str]:
    """The notices of the algorithm's changed defaults (its class's `changed_defaults`) that
    the raw `algorithm` section relies on by not setting them."""
    changed = getattr(settings_class(algorithm["name"]), "changed_defaults", {})
    return [notice for key, notice in changed.items() if key not in algorithm]


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b=value` -> (["a", "b"], parsed YAML value)."""
    if "=" not in text:
        raise ConfigError(
            f"override {text!r} must look like key=value (e.g. rounds=3, algorithm.lam=1)"
        )
    key, _, value = text.partition("=")
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError(f"override {text!r} has an empty key")
    if not value.strip():
        return path, None
    try:
        return path, load_yaml(value)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({problem})") from None


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    out = load_yaml(yaml.safe_dump(raw)) or {}  # deep copy of plain data
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {part} is not a section")
        node[path[-1]] = value
    return out


def load_config(
    path: str | Path | Mapping[str, Any] | None = None,
    overrides: list[str] | None = None,
    *,
    data_dir: str | Path | None = None,
) -> ExperimentConfig:
    """The one way in to a config: read a YAML file (`path`; a mapping: the config itself;
    None: the defaults), apply `key=value` overrides and `data_dir` (`data.data_dir`), then
    check every section and build the algorithm once (`cfg.algorithm`)."""
    if isinstance(path, Mapping):
        raw: Any = apply_overrides(dict(path), overrides) if overrides else path
    else:  # a file's YAML, copied through sorted YAML as overrides are applied
        raw = apply_overrides(read_config_file(path) if path is not None else {}, overrides or [])
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a mapping, got {type(raw).__name__}")
    if data_dir is not None and isinstance(raw.get("data") or {}, dict):
        # Last, over any override; as given, not read as YAML (a path may hold ': ' or ' #').
        raw = {**raw, "data": {**(raw.get("data") or {}), "data_dir": str(data_dir)}}
    check_keys(raw, "the config")
    unknown = sorted(set(raw) - set(TOP_LEVEL))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TOP_LEVEL)}")
    algorithm = raw.get("algorithm") or {}
    if isinstance(algorithm, dict) and "name" not in algorithm:
        algorithm = {"name": "cosmos", **algorithm}  # the default algorithm, e.g. for overrides
    sections = {
        # Read as the others, as the class its name picks: built and checked once, here;
        # runs take copies of it (AlgorithmSection.fresh).
        "algorithm": validate_algorithm(algorithm),
        "faults": build_section(FaultConfig, raw.get("faults"), "faults"),
        "data": build_section(DataConfig, raw.get("data"), "data"),
        "tracking": build_section(TrackingConfig, raw.get("tracking"), "tracking"),
        "clients": build_section(ClientsConfig, raw.get("clients"), "clients"),
        "sites": build_section(SitesConfig, raw.get("sites"), "sites"),
        "privacy": build_section(PrivacyConfig, raw.get("privacy"), "privacy"),
    }
    if sections["sites"].files:  # one client per site file
        given = (raw.get("data") or {}).get("num_clients")
        if given is not None and given != len(sections["sites"].files):
            raise ConfigError(
                f"data.num_clients = {given} and sites.files lists {len(sections['sites'].files)} "
                "sites; leave num_clients out (it follows the files)"
            )
        sections["data"].num_clients = len(sections["sites"].files)
    clients = sections["clients"]
    if isinstance(clients.models, dict):
        # By name, as a mapping read from a file already is (apply_overrides round-trips it
        # through sorted YAML): the same mix then gives the same clients whether it came from a
        # file, an override or a run directory's config.yaml (which resume rebuilds from).
        clients.models = dict(sorted(clients.models.items()))
    # Last, with every section: the config decides its server models from them (schema.py).
    top = build_section(
        ExperimentConfig, {k: v for k, v in raw.items() if k in RUN_SETTINGS}, "config", **sections
    )
    top.notices = changed_default_notices(algorithm)
    check_values(top)
    return top


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The YAML of a config file as plain data (not yet validated)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        raw = load_yaml(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text ({err.reason})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(p)!r} is not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping, got {type(raw).__name__}")
    return raw


def dump_config(cfg: ExperimentConfig) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
