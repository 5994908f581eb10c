"""The paired-difference columns of an ablation table: each row against the same series at a
base value of the swept key (`--base KEY=VALUE`), and against other algorithms' reported models
in the same cell (`--versus ALG,...`). Paired per seed, because the seeds of a grid share their
splits and initial models: the difference is the effect, the seed-to-seed spread is not."""

from __future__ import annotations

from typing import Any

from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.grid import parse_value, value_text
from cosmosfl.reporting.stats import paired_difference
from cosmosfl.reporting.sweep_data import Point, Sweep


def parse_base(text: str, keys: list[str]) -> dict[str, Any]:
    """`KEY=VALUE`, or `VALUE` when the ablation has one key: {key: parsed value} (values parse
    as grid values do: YAML, `1e-3` a number)."""
    key = next((k for k in keys if text.startswith(f"{k}=")), None)
    head = text.partition("=")[0]
    if key is None and "=" in text and "." in head and " " not in head:
        raise ConfigError(
            f"report: --base {text!r}: {head} is not a key of this ablation "
            f"(its keys: {', '.join(keys)})"
        )
    if key is None:
        if len(keys) != 1:
            raise ConfigError(
                f"report: --base {text!r}: this ablation has several keys "
                f"({', '.join(keys)}); write --base KEY=VALUE"
            )
        key = keys[0]
    value = parse_value(text.removeprefix(f"{key}="), f"report: --base {text!r}")
    return {key: value}


def set_contrasts(sweep: Sweep, base: dict[str, Any], versus: list[str]) -> None:
    """Check and set what the paired-difference columns compare with (see Sweep)."""
    for key, value in base.items():
        axis = next((a for a in sweep.axes if a["key"] == key), None)
        if axis is None:
            raise ConfigError(
                f"report: --base {key}={value_text(value)}: {key} is not a key of this "
                f"ablation (its keys: {', '.join(sweep.keys)})"
            )
        if value not in axis["values"]:
            raise ConfigError(
                f"report: --base {key}={value_text(value)}: not one of the values of {key} "
                f"({', '.join(map(value_text, axis['values']))})"
            )
        if not any(p.values[key] == value for p in sweep.points):
            sweep.notes.append(f"no finished run at the base {key} = {value_text(value)} yet")
    present = list(dict.fromkeys(p.algorithm for p in sweep.points))
    for algorithm in versus:
        if algorithm not in present:
            raise ConfigError(
                f"report: --versus {algorithm}: no finished run of it in this ablation "
                f"(algorithms with runs: {', '.join(present)})"
            )
    sweep.base, sweep.versus = dict(base), list(versus)


def paired_text(a: Point, b: Point | None) -> str:
    if b is None:
        return "—"
    if b is a:
        return ""
    found = paired_difference(a.seeds, a.final, b.seeds, b.final)
    return found.text() if found else "— (no common seed)"
