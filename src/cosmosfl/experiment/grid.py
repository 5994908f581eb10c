"""A sweep's grid as text and as files: `--grid KEY=V1,V2,...` parsed into a `GridAxis`, values
read and written as YAML the way overrides are (`parse_value`, `value_text`), each value's
folder name, and a sweep folder's sweep.yaml read back (`read_sweep`).

Planning and running a sweep is sweep.py; reports read the same files (cosmosfl.reporting), so
this module imports nothing of the run machinery.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.yamlio import load_yaml

SWEEP_FILE = "sweep.yaml"
# A float in exponent notation without a dot (1e-3): YAML 1.1, which PyYAML reads, calls it
# a string; in a grid of learning rates it is meant as a number.
_EXPONENT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


@dataclass(frozen=True)
class GridAxis:
    """One `--grid KEY=V1,V2,...`: the key, its values, and each value's folder name."""

    key: str
    values: list[Any]
    names: list[str]


def value_text(value: Any) -> str:
    """A value as the YAML text an override parses back to the same value."""
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), sort_keys=False)
    return text.strip().removesuffix("...").strip()


def folder_name(key: str, value: Any) -> str:
    """`key=value` as a folder name: the value's text when it is safe as one, else a readable
    part plus a short hash of the text (mappings, lists, odd characters), so two values never
    share a folder."""
    text = value_text(value)
    safe = re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_")[:40]
    if safe != text or not safe:
        safe = f"{safe}-{hashlib.sha1(text.encode()).hexdigest()[:6]}".lstrip("-")
    return f"{key}={safe}"


def parse_value(text: str, what: str) -> Any:
    """One value as grid values parse (YAML; `1e-3` a number); `what` names it in errors."""
    if not text.strip():
        raise ConfigError(f"{what}: the value is empty")
    try:
        value = load_yaml(text)
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0]
        raise ConfigError(f"{what}: {text!r} is not a valid YAML value ({first})") from None
    return _exponent_as_number(value)


def _exponent_as_number(value: Any) -> Any:
    return float(value) if isinstance(value, str) and _EXPONENT_FLOAT.fullmatch(value) else value


def parse_grid(text: str) -> GridAxis:
    """`data.num_clients=5,10` -> GridAxis; values are YAML like overrides (`{mlp: 1}`, `[a, b]`,
    `cnn`, `1e-3`), separated by commas outside brackets."""
    if "=" not in text:
        raise ConfigError(
            f"--grid {text!r} must look like KEY=V1,V2,... (e.g. data.num_clients=5,10)"
        )
    key, _, rhs = text.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--grid {text!r} has an empty key; e.g. data.num_clients=5,10")
    if not re.sub(r"[\s,]", "", rhs):
        raise ConfigError(f"--grid {text!r} lists no values; e.g. {key}=V1,V2")
    try:
        values = load_yaml(f"[{rhs}]")
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0]
        raise ConfigError(
            f"--grid {text!r}: the values are not valid YAML ({first}); give each value, "
            'separated by commas, e.g. 0.1,0.2 or "{mlp: 1},{cnn: 0.5, mlp: 0.5}"'
        ) from None
    values = [_exponent_as_number(v) for v in values]
    if not values:
        raise ConfigError(f"--grid {text!r} lists no values; e.g. {key}=V1,V2")
    for i, v in enumerate(values):
        if v in values[:i]:
            raise ConfigError(f"--grid {text!r} names the value {value_text(v)} twice")
    return GridAxis(key, values, [folder_name(key, v) for v in values])


def read_sweep(out: str | Path) -> dict[str, Any] | None:
    """sweep.yaml of a sweep folder, or None when `out` is not one."""
    path = Path(out) / SWEEP_FILE
    return load_yaml(path.read_text()) if path.is_file() else None
