"""An ablation report from comparison folders run separately.

`cosmosfl sweep` runs a grid in one process. A grid run as separate `cosmosfl compare` folders
(two processes at once on two cores, across working sessions, on several machines) gets the same
table and plot with

    cosmosfl report OUT --key cosmos.temperature --cell 0=runs/T0 --cell 1=runs/base \\
        --cell 2=runs/T2 --shared runs/refs --base 1 --versus local,comet

Each `--cell VALUE=DIR` is one value of the key and a comparison folder (a value given twice
merges its folders); each `--shared DIR` holds runs that do not depend on the key (a `local` or
COMET run beside a COSMOS-only setting) and fills, in every cell, the algorithms the cell has no
run of. The assembly is saved in OUT/assembly.yaml, so `cosmosfl report OUT` redraws it as the
runs finish.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.experiment.ablation import AblationReport, Sweep, cell_points, write_sweep_report
from cosmosfl.experiment.config import ConfigError
from cosmosfl.experiment.contrasts import set_contrasts
from cosmosfl.experiment.rundir import write_atomic
from cosmosfl.experiment.runset import Run, RunSet, algorithm_order, display_name, load_runs
from cosmosfl.experiment.sweep import parse_value, value_text

ASSEMBLY = "assembly.yaml"
# The key names the output files (ablation-<key>.md), so it must be a plain dotted name.
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def parse_cell(text: str) -> tuple[Any, Path]:
    """`VALUE=DIR` -> (parsed value, folder); the value is everything before the last `=` that
    is followed by an existing folder, so values may hold `=` themselves."""
    for i in [m.start() for m in re.finditer("=", text)][::-1]:
        value, folder = text[:i], Path(text[i + 1 :])
        if folder.is_dir():
            return parse_value(value, f"report: --cell {text!r}"), folder
    if "=" not in text:
        raise ConfigError(f"report: --cell {text!r} must look like VALUE=DIR (e.g. 0.5=runs/a)")
    raise ConfigError(
        f"report: --cell {text!r}: no folder {text.rpartition('=')[2]!r}; give "
        "VALUE=DIR with DIR a folder `cosmosfl compare` wrote"
    )


def _merge(into: dict[str, list[Run]], runset: RunSet, where: str) -> None:
    for algorithm, runs in runset.runs.items():
        mine = into.setdefault(algorithm, [])
        for run in runs:
            twin = next((r for r in mine if r.seed == run.seed), None)
            if twin is not None:
                raise ConfigError(
                    f"report: {where} has two finished runs of {algorithm} seed {run.seed}: "
                    f"{str(twin.path)!r} and {str(run.path)!r}; keep one"
                )
            mine.append(run)


def assemble_sweep(
    out: str | Path, key: str, cells: list[tuple[Any, Path]], shared: list[Path]
) -> Sweep:
    """A one-key Sweep rooted at `out` from comparison folders (see the module's docstring)."""
    if not _KEY.fullmatch(key):
        raise ConfigError(f"report: --key {key!r}: give the setting's dotted name, e.g. cosmos.lam")
    if not cells:
        raise ConfigError("report: --key needs at least one --cell VALUE=DIR")
    values: list[Any] = []
    folders: dict[int, list[Path]] = {}
    for value, folder in cells:
        if value not in values:
            values.append(value)
        folders.setdefault(values.index(value), []).append(folder)
    notes: list[str] = []
    reference: dict[str, list[Run]] = {}
    for folder in shared:
        runset = load_runs(folder)
        notes += [f"unfinished run ignored: {p}" for p in runset.unfinished]
        _merge(reference, runset, f"the --shared folders ({', '.join(map(str, shared))})")
    points = []
    filled: dict[str, int] = {}
    for i, value in enumerate(values):
        runs: dict[str, list[Run]] = {}
        where = f"--cell {value_text(value)}"
        for folder in folders[i]:
            try:
                runset = load_runs(folder)
            except ConfigError:
                notes.append(f"{where}: no finished run in {folder} yet")
                continue
            notes += [f"unfinished run ignored: {p}" for p in runset.unfinished]
            _merge(runs, runset, where)
        for algorithm, reference_runs in reference.items():
            if algorithm not in runs:
                runs[algorithm] = list(reference_runs)
                filled[algorithm] = filled.get(algorithm, 0) + 1
        if runs:
            order = algorithm_order(list(runs))
            ordered = {a: sorted(runs[a], key=lambda r: r.seed) for a in order}
            points += cell_points({key: value}, RunSet(Path(out), ordered))
    if not points:
        raise ConfigError("report: none of the --cell folders holds a finished run yet")
    for algorithm, count in filled.items():
        if count < len(values):
            notes.append(
                f"{display_name(algorithm)}: the --shared run in {count} of {len(values)} "
                "cells, the cell's own run in the others"
            )
    axes = [{"key": key, "values": values}]
    every = [a for a, n in filled.items() if n == len(values)]
    return Sweep(Path(out), axes, points, dict(points[0].summary), notes, {a: [key] for a in every})


def _relative(folder: Path, out: Path) -> str:
    return os.path.relpath(folder.resolve(), out.resolve())


def write_assembled_report(
    out: str | Path,
    key: str,
    cells: list[tuple[Any, Path]],
    shared: list[Path],
    base: dict[str, Any] | None = None,
    versus: list[str] | None = None,
) -> AblationReport:
    """ablation-<key>.md and .png in `out` from comparison folders, and OUT/assembly.yaml (the
    folders relative to OUT) so that `cosmosfl report OUT` redraws it."""
    out, shared = Path(out), [Path(f) for f in shared]
    sweep = assemble_sweep(out, key, cells, shared)
    set_contrasts(sweep, base or {}, versus or [])
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "key": key,
        "cells": [{"value": v, "folder": _relative(f, out)} for v, f in cells],
        "shared": [_relative(f, out) for f in shared],
        "versus": list(sweep.versus),
    }
    if key in sweep.base:  # a mapping, so that a base value of null stays a value
        doc["base"] = {"value": sweep.base[key]}
    write_atomic(out / ASSEMBLY, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    report = write_sweep_report(sweep)
    report.files.insert(0, out / ASSEMBLY)
    return report


def read_assembly(out: str | Path) -> dict[str, Any] | None:
    """OUT/assembly.yaml with its folders made relative to the working directory again."""
    out = Path(out)
    path = out / ASSEMBLY
    if not path.is_file():
        return None
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        return {
            "key": str(doc["key"]),
            "cells": [(c["value"], out / c["folder"]) for c in doc["cells"]],
            "shared": [out / f for f in doc.get("shared") or []],
            "base": {str(doc["key"]): doc["base"]["value"]} if doc.get("base") else {},
            "versus": [str(a) for a in doc.get("versus") or []],
        }
    except (KeyError, TypeError) as err:
        raise ConfigError(
            f"report: {str(path)!r} is not an assembly `cosmosfl report OUT --key ... --cell ...` "
            f"wrote ({err!r}); run that command again"
        ) from None
