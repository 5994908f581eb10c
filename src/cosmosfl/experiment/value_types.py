"""Config values against their fields' type hints: the one type check every config section
(and the `algorithm` section) runs before any constraint, naming the dotted key on a mismatch;
and `build_section`, the one way every section is read."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Collection
from dataclasses import fields
from typing import Any

from cosmosfl.core.constraints import check_parameters
from cosmosfl.experiment.errors import ConfigError


def type_ok(value: Any, hint: Any) -> bool:
    """Whether `value` is of the type `hint` names (an int counts as a float, a bool as
    neither)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is dict:
        kt, vt = typing.get_args(hint)
        return isinstance(value, dict) and all(
            type_ok(k, kt) and type_ok(v, vt) for k, v in value.items()
        )
    if origin is list:
        (it,) = typing.get_args(hint)
        return isinstance(value, list) and all(type_ok(v, it) for v in value)
    return isinstance(value, hint)


def type_name(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def check_keys(raw: dict[Any, Any], where: str) -> None:
    """Keys must be strings (YAML also makes ints, nulls and booleans of bare keys)."""
    odd = [k for k in raw if not isinstance(k, str)]
    if odd:
        raise ConfigError(f"keys in {where} must be names, got {', '.join(map(repr, odd))}")


def as_number(value: Any, hint: Any, field_name: str) -> Any:
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


def typed_values(raw: dict[str, Any], hints: dict[str, Any], where: str) -> dict[str, Any]:
    """`raw` with each value's type checked against `hints` (an int as a float where a float
    is allowed); the first mismatch raises ConfigError naming `where.key`."""
    values = {}
    for name, value in raw.items():
        hint = hints[name]
        value = as_number(value, hint, f"{where}.{name}")
        if not type_ok(value, hint):
            raise ConfigError(f"{where}.{name} = {value!r} must be of type {type_name(hint)}")
        values[name] = value
    return values


def build_section(
    cls: type,
    raw: Any,
    where: str,
    *,
    keys: Collection[str] | None = None,
    name: str | None = None,
    constrained: bool = False,
    **built: Any,
) -> Any:
    """Section `cls` from the mapping `raw`: every config section's reading (the `algorithm`
    section's too, with the class its name picks), keys and types checked, then built.
    `keys`: the settable keys (default: `cls`'s init fields); `name`: the algorithm's, which
    messages name (a section's own errors are otherwise kept as they are); `constrained`: each
    value against `cls`'s constraints before building (a class whose constructor checks
    combinations of values); `built`: fields given already checked (the top level's sections).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping of keys to values, got {raw!r}")
    check_keys(raw, where)
    hints = typing.get_type_hints(cls)
    names = list(keys) if keys is not None else [f.name for f in fields(cls) if f.init]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(f'{where}.{k}' for k in unknown)}"
            + (f" for {name}; allowed: " if name else f"; allowed in {where}: ")
            + ", ".join(names)
        )
    values = typed_values(raw, hints, where)
    try:
        if constrained:
            check_parameters(cls, values)
        return cls(**values, **built)
    except (TypeError, ValueError) as err:  # a section that checks itself (FaultConfig)
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"{where} ({name}): {err}" if name else str(err)) from None
