"""The experiment config: reading, validation and `key=value` overrides.

A config is three sections (`data`, `clients`, `algorithm`) plus run settings. Every key is
checked before any training starts: unknown keys and bad values are rejected with the field,
the value and what is allowed. The sections' dataclasses, with the constraints and rules of
their values, are in schema.py (its names are importable from here); `check_values` runs them
with the one mechanism the algorithms use (core/constraints.py).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
import warnings
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.algorithms.registry import ALGORITHMS, algorithm_class
from cosmosfl.core.constraints import check_parameters, check_rules
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.model_spec import parse_models
from cosmosfl.experiment.references import REFERENCE_RUNS
from cosmosfl.experiment.schema import (
    NOT_IDENTITY,
    RUN_SETTINGS,
    TOP_LEVEL,
    ClientsConfig,
    DataConfig,
    ExperimentConfig,
    PrivacyConfig,
    SitesConfig,
    TrackingConfig,
    flatten,
    identity,
)
from cosmosfl.experiment.yamlio import load_yaml

__all__ = [
    "NOT_IDENTITY",
    "RUN_SETTINGS",
    "TOP_LEVEL",
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


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is dict:
        kt, vt = typing.get_args(hint)
        return isinstance(value, dict) and all(
            _type_ok(k, kt) and _type_ok(v, vt) for k, v in value.items()
        )
    if origin is list:
        (it,) = typing.get_args(hint)
        return isinstance(value, list) and all(_type_ok(v, it) for v in value)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _check_keys(raw: dict[Any, Any], where: str) -> None:
    """Keys must be strings (YAML also makes ints, nulls and booleans of bare keys)."""
    odd = [k for k in raw if not isinstance(k, str)]
    if odd:
        raise ConfigError(f"keys in {where} must be names, got {', '.join(map(repr, odd))}")


def _as_number(value: Any, hint: Any, field_name: str) -> Any:
    """`value` as a float where `hint` allows a float and it is a number (ints too); refuses
    NaN, infinities and ints beyond float range, which no setting means."""
    if float not in (typing.get_args(hint) or (hint,)):
        return value
    if not isinstance(value, int | float) or isinstance(value, bool):
        return value
    try:
        number = float(value)
    except OverflowError:
        raise ConfigError(f"{field_name} = {value} is too large for a number") from None
    if not math.isfinite(number):
        raise ConfigError(f"{field_name} = {value!r} must be a finite number")
    return number


def _build(cls: type, raw: Any, where: str) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping of keys to values, got {raw!r}")
    _check_keys(raw, where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(f'{where}.{k}' for k in unknown)}; "
            f"allowed in {where}: {', '.join(names)}"
        )
    try:
        return cls(**_typed(raw, hints, where))
    except (TypeError, ValueError) as err:  # a section that checks itself (FaultConfig)
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(str(err)) from None


def _typed(raw: dict[str, Any], hints: dict[str, Any], where: str) -> dict[str, Any]:
    """`raw` with each value's type checked against `hints` (an int as a float where a float
    is allowed); the first mismatch raises ConfigError naming `where.key`."""
    values = {}
    for name, value in raw.items():
        hint = hints[name]
        value = _as_number(value, hint, f"{where}.{name}")
        if not _type_ok(value, hint):
            raise ConfigError(f"{where}.{name} = {value!r} must be of type {_type_name(hint)}")
        values[name] = value
    return values


def reference_runs() -> dict[str, type]:
    """Runs accepted in `algorithm.name` that are not federated algorithms (e.g. centralized).

    They are reported beside the algorithms but are not in the algorithm registry, because they
    may do what no protocol may (the centralized reference pools private data); see
    experiment/references.py.
    """
    return dict(REFERENCE_RUNS)


def _allowed_names() -> str:
    return (
        f"{', '.join(sorted(ALGORITHMS))}; "
        f"reference runs (not federated): {', '.join(sorted(reference_runs()))}"
    )


def settings_class(name: str) -> type:
    """The class whose fields are the settings of `algorithm.name` (algorithm or reference run)."""
    if not isinstance(name, str):
        raise ConfigError(f"algorithm.name = {name!r} must be a name; allowed: {_allowed_names()}")
    if name in ALGORITHMS:
        return algorithm_class(name)
    references = reference_runs()
    if name in references:
        return references[name]
    raise ConfigError(f"algorithm.name = {name!r} is not known; allowed: {_allowed_names()}")


def algorithm_options(name: str) -> dict[str, dataclasses.Field]:
    """The config-settable hyperparameters of an algorithm (its init fields with plain types)."""
    cls = settings_class(name)
    hints = typing.get_type_hints(cls)
    settable = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        if _type_ok_for_config(hints[f.name]):
            settable[f.name] = f
    return settable


def _type_ok_for_config(hint: Any) -> bool:
    args = typing.get_args(hint) or (hint,)
    return all(a in (int, float, str, bool, type(None)) for a in args)


def validate_algorithm(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or "name" not in raw:
        raise ConfigError(f"algorithm must be a mapping with a 'name' (one of {_allowed_names()})")
    _check_keys(raw, "algorithm")
    name = raw["name"]
    cls = settings_class(name)
    raw = _renamed_keys(cls, name, raw)
    options = algorithm_options(name)
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(raw) - set(options) - {"name"})
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join('algorithm.' + k for k in unknown)} for {name}; "
            f"allowed: {', '.join(sorted(options))}"
        )
    given = _typed({k: v for k, v in raw.items() if k != "name"}, hints, "algorithm")
    try:
        # Each value against the class's declared constraints (core/constraints.py), then the
        # algorithm itself for combinations of settings, all before any training.
        check_parameters(cls, given)
        instance = cls(**given)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"algorithm ({name}): {err}") from None
    # The resolved config names every setting, defaults included, so a run directory's
    # config.yaml reproduces the run even if a default changes later.
    return {"name": name, **{key: getattr(instance, key) for key in options}}


def _renamed_keys(cls: type, name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with deprecated setting names (the class's `renamed_parameters`) replaced by the
    current ones, each with a DeprecationWarning; both names at once is an error."""
    renamed = getattr(cls, "renamed_parameters", {})
    if not any(key in renamed for key in raw):
        return raw
    out = {}
    for key, value in raw.items():
        new = renamed.get(key)
        if new is None:
            out[key] = value
            continue
        if new in raw:
            raise ConfigError(
                f"algorithm.{key} and algorithm.{new} are one setting of {name} ({key} is its "
                f"deprecated name); set only algorithm.{new}"
            )
        warnings.warn(
            f"algorithm.{key} of {name} is deprecated; use algorithm.{new} (same meaning)",
            DeprecationWarning,
            stacklevel=4,  # _renamed_keys <- validate_algorithm <- config_from_dict <- caller
        )
        out[new] = value
    return out


def config_from_dict(raw: dict[str, Any]) -> ExperimentConfig:
    """Validate a plain dict (e.g. parsed YAML) into an ExperimentConfig."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a mapping, got {type(raw).__name__}")
    _check_keys(raw, "the config")
    unknown = sorted(set(raw) - set(TOP_LEVEL))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TOP_LEVEL)}")
    top = _build(
        ExperimentConfig,
        {k: v for k, v in raw.items() if k in RUN_SETTINGS},
        "config",
    )
    top.faults = _build(FaultConfig, raw.get("faults"), "faults")
    top.data = _build(DataConfig, raw.get("data"), "data")
    top.tracking = _build(TrackingConfig, raw.get("tracking"), "tracking")
    top.clients = _build(ClientsConfig, raw.get("clients"), "clients")
    top.sites = _build(SitesConfig, raw.get("sites"), "sites")
    top.privacy = _build(PrivacyConfig, raw.get("privacy"), "privacy")
    if top.sites.files:  # one client per site file
        given = (raw.get("data") or {}).get("num_clients")
        if given is not None and given != len(top.sites.files):
            raise ConfigError(
                f"data.num_clients = {given} and sites.files lists {len(top.sites.files)} "
                "sites; leave num_clients out (it follows the files)"
            )
        top.data.num_clients = len(top.sites.files)
    if isinstance(top.clients.models, dict):
        # By name, as a mapping read from a file already is (apply_overrides round-trips it
        # through sorted YAML): the same mix then gives the same clients whether it came from a
        # file, an override or a run directory's config.yaml (which resume rebuilds from).
        top.clients.models = dict(sorted(top.clients.models.items()))
    algorithm = raw.get("algorithm") or {}
    if isinstance(algorithm, dict) and "name" not in algorithm:
        algorithm = {"name": "cosmos", **algorithm}  # the default algorithm, e.g. for overrides
    top.algorithm = validate_algorithm(algorithm)
    top.notices = changed_default_notices(algorithm)
    check_values(top)
    return top


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
    parse_models(cfg.clients.models)  # names importable, arguments accepted, weights positive


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
    path: str | Path | None = None, overrides: list[str] | None = None
) -> ExperimentConfig:
    """Read a YAML config (or start from the defaults), apply overrides, validate."""
    raw = read_config_file(path) if path is not None else {}
    return config_from_dict(apply_overrides(raw, overrides or []))


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
