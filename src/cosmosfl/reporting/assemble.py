"""An ablation report from comparison folders run separately.

`cosmosfl sweep` runs a grid in one process. A grid run as separate `cosmosfl compare` folders
(two processes at once on two cores, across working sessions, on several machines) gets the same
table and plot with

    cosmosfl report OUT --key cosmos.temperature --cell 0=runs/T0 --cell 1=runs/base \\
        --cell 2=runs/T2 --shared runs/refs --base 1 --versus local,comet

Each `--cell VALUE=DIR` is one value of the key and a comparison folder; the folders of one
value, then every `--shared DIR` (runs that do not depend on the key: `local` or COMET beside
a COSMOS-only setting), fill the cell in order, each adding the algorithms the ones before it
lack. With several `--key`s a cell's value is a list, one value per key (`--cell "[10, 0]=DIR"`).
An algorithm whose runs are the very same in the cells along a key is drawn as one flat line
over it, as a sweep's shared runs are. The assembly is saved in OUT/assembly.yaml, so `cosmosfl
report OUT` redraws it as the runs finish.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.grid import parse_value, value_text
from cosmosfl.experiment.rundir import write_atomic
from cosmosfl.reporting.ablation import AblationReport, write_sweep_report
from cosmosfl.reporting.contrasts import set_contrasts
from cosmosfl.reporting.runset import Run, RunSet, algorithm_order, display_name, load_runs
from cosmosfl.reporting.sweep_data import Sweep, cell_points, is_numeric

ASSEMBLY = "assembly.yaml"
# The key names the output files (ablation-<key>.md), so it must be a plain dotted name.
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def parse_cell(text: str) -> tuple[Any, Path]:
    """`VALUE=DIR` -> (parsed value, folder). The value ends at the first `=` followed by an
    existing folder, so folder names may hold `=` (a sweep's cells do: `sw/cosmos.lam=0`)."""
    if "=" not in text:
        raise ConfigError(f"report: --cell {text!r} must look like VALUE=DIR (e.g. 0.5=runs/a)")
    for i in [m.start() for m in re.finditer("=", text)]:
        value, folder = text[:i], Path(text[i + 1 :])
        if folder.is_dir():
            return parse_value(value, f"report: --cell {text!r}"), folder
    raise ConfigError(
        f"report: --cell {text!r}: no folder {text.partition('=')[2]!r}; give "
        "VALUE=DIR with DIR a folder `cosmosfl compare` wrote"
    )


def check_shared(shared: list[Path]) -> None:
    for folder in shared:
        if not Path(folder).is_dir():
            raise ConfigError(
                f"report: --shared {str(folder)!r}: no such folder; give a folder "
                "`cosmosfl compare` wrote"
            )


def _fill(
    runs: dict[str, list[Run]], folder: Path, where: str, notes: list[str]
) -> list[tuple[str, str, Run]]:
    """Add the algorithms of `folder` that `runs` has none of; return those left out."""
    try:
        runset = load_runs(folder, nested=True)
    except ConfigError:
        notes.append(f"{where}: no finished run in {folder} yet")
        return []
    notes += [f"unfinished run ignored: {p}" for p in runset.unfinished]
    left_out = []
    for algorithm, found in runset.runs.items():
        if algorithm in runs:
            left_out += [(where, str(folder), r) for r in found]
            continue
        runs[algorithm] = list(found)
    return left_out


def _cell_values(keys: list[str], value: Any) -> tuple[Any, ...]:
    if len(keys) == 1:
        return (value,)
    if not isinstance(value, list) or len(value) != len(keys):
        raise ConfigError(
            f"report: --cell {value_text(value)}: with {len(keys)} keys "
            f"({', '.join(keys)}) a cell's value is a list of {len(keys)} values, e.g. "
            f'--cell "[10, 0]=DIR"'
        )
    return tuple(value)


def _shared_keys(
    keys: list[str], cells: list[tuple[tuple[Any, ...], dict[str, list[Run]]]]
) -> dict[str, list[str]]:
    """Per algorithm, the keys whose cells hold the very same runs of it (the other keys
    equal): its line is one run over that key's values, as a sweep's shared runs are."""
    shared: dict[str, list[str]] = {}
    names = {a for _, runs in cells for a in runs}
    for algorithm in sorted(names):
        for k, key in enumerate(keys):
            pairs = [
                (ra[algorithm], rb[algorithm])
                for i, (va, ra) in enumerate(cells)
                for vb, rb in cells[i + 1 :]
                if algorithm in ra and algorithm in rb and va[k] != vb[k]
                and all(va[j] == vb[j] for j in range(len(keys)) if j != k)
            ]  # fmt: skip
            same = [
                {r.path.resolve() for r in a} == {r.path.resolve() for r in b} for a, b in pairs
            ]
            if pairs and all(same):
                shared.setdefault(algorithm, []).append(key)
    return shared


def assemble_sweep(
    out: str | Path, keys: list[str], cells: list[tuple[Any, Path]], shared: list[Path]
) -> Sweep:
    """A Sweep rooted at `out` from comparison folders (see the module's docstring)."""
    for key in keys:
        if not _KEY.fullmatch(key):
            raise ConfigError(
                f"report: --key {key!r}: give the setting's dotted name, e.g. cosmos.lam"
            )
    if len(set(keys)) != len(keys) or not keys:
        raise ConfigError(f"report: --key: give each key once ({', '.join(keys)})")
    if not cells:
        raise ConfigError("report: --key needs at least one --cell VALUE=DIR")
    order: list[tuple[Any, ...]] = []
    folders: list[list[Path]] = []
    for value, folder in cells:
        combo = _cell_values(keys, value)
        if combo not in order:
            order.append(combo)
            folders.append([])
        folders[order.index(combo)].append(folder)
    check_shared(shared)
    notes: list[str] = []
    left_out: list[tuple[str, str, Run]] = []
    filled: list[tuple[tuple[Any, ...], dict[str, list[Run]]]] = []
    for combo, where_from in zip(order, folders, strict=True):
        runs: dict[str, list[Run]] = {}
        where = f"--cell {value_text(list(combo) if len(keys) > 1 else combo[0])}"
        for folder in where_from:
            left_out += _fill(runs, folder, where, notes)
        for folder in shared:  # fills gaps by design: what it leaves out is not news
            _fill(runs, folder, where, notes)
        if runs:
            filled.append((combo, {a: runs[a] for a in algorithm_order(list(runs))}))
    # A cell folder's runs left out are worth a note only if no cell uses them (the λ = 0
    # cell given the λ = 5 folder for its references leaves out λ = 5's COSMOS, used there).
    used = {r.path.resolve() for _, runs in filled for rs in runs.values() for r in rs}
    for where, folder, run in left_out:
        if run.path.resolve() not in used:
            notes.append(
                f"{where}: {display_name(run.algorithm)} of {folder} not used (a folder given "
                "before it has that algorithm)"
            )
    points = []
    runsets: list[tuple[dict[str, Any], RunSet]] = []
    for combo, runs in filled:
        ordered = {a: sorted(rs, key=lambda r: r.seed) for a, rs in runs.items()}
        values = dict(zip(keys, combo, strict=True))
        runsets.append((values, RunSet(Path(out), ordered)))
        points += cell_points(values, runsets[-1][1])
    if not points:
        raise ConfigError("report: none of the --cell folders holds a finished run yet")
    axes = []
    for k, key in enumerate(keys):
        values: list[Any] = []
        for combo in order:
            if combo[k] not in values:
                values.append(combo[k])
        if is_numeric(values):  # a numeric axis is drawn left to right, whatever the order given
            values.sort()
        axes.append({"key": key, "values": values})
    summary = dict(points[0].summary)
    notes = list(dict.fromkeys(notes))
    shared_keys = _shared_keys(keys, filled)
    return Sweep(Path(out), axes, points, summary, notes, shared_keys, cells=runsets)


def _relative(folder: Path, out: Path) -> str:
    return os.path.relpath(folder.resolve(), out.resolve())


def write_assembled_report(
    out: str | Path,
    keys: list[str],
    cells: list[tuple[Any, Path]],
    shared: list[Path],
    base: dict[str, Any] | None = None,
    versus: list[str] | None = None,
) -> AblationReport:
    """ablation-<key>.md and .png in `out` from comparison folders, and OUT/assembly.yaml (the
    folders relative to OUT) so that `cosmosfl report OUT` redraws it."""
    out, shared = Path(out), [Path(f) for f in shared]
    check_shared(shared)
    # Saved before any run is read, so that an assembly made before its runs finish can be
    # redrawn with `cosmosfl report OUT` once they have.
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "keys": list(keys),
        "cells": [{"value": v, "folder": _relative(f, out)} for v, f in cells],
        "shared": [_relative(f, out) for f in shared],
        "versus": list(versus or []),
    }
    if base:
        doc["base"] = dict(base)
    write_atomic(out / ASSEMBLY, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    sweep = assemble_sweep(out, keys, cells, shared)
    set_contrasts(sweep, base or {}, versus or [])
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
            "keys": [str(k) for k in doc["keys"]],
            "cells": [(c["value"], out / c["folder"]) for c in doc["cells"]],
            "shared": [out / f for f in doc.get("shared") or []],
            "base": dict(doc.get("base") or {}),
            "versus": [str(a) for a in doc.get("versus") or []],
        }
    except (KeyError, TypeError) as err:
        raise ConfigError(
            f"report: {str(path)!r} is not an assembly `cosmosfl report OUT --key ... --cell ...` "
            f"wrote ({err!r}); run that command again"
        ) from None
