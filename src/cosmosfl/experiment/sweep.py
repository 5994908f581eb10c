"""`cosmosfl sweep`: a grid of config values × algorithms × seeds on compare's machinery.

Every grid cell (one value per `--grid` key) is a comparison: `plan_compare` of the base config
with the cell's values set as overrides, into `OUT/<key1>=<v1>/<key2>=<v2>/`, so each cell
gets the same splits and initial client models as `cosmosfl compare` gives for that setting,
and each cell folder is itself a compare folder (`cosmosfl report` works on it).

A grid key names a config key (`data.num_clients`, `algorithm.server_model`) or one
algorithm's setting (`cosmos.lam`, like compare's `<algorithm>.<key>=<value>`), which leaves
the other algorithms' runs the same in every cell of that key. Such a run is trained once: a
later cell whose run has the same experiment config as an earlier one gets a symbolic link to
it (listed under `shared_runs` in sweep.yaml) instead of a second, identical training run.

Running writes run directories and sweep.yaml only; the ablation report is the reporting
layer's (`cosmosfl.reporting.ablation.write_ablation_report`, which the CLI calls after a
sweep). Parsing `--grid` and reading sweep.yaml back are in grid.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cosmosfl.experiment.compare import (
    ComparePlan,
    PlannedRun,
    changed_error,
    execute_run,
    known_names,
    parse_algorithms,
    parse_seeds,
    plan_compare,
    run_state,
    run_tracker,
    split_overrides,
)
from cosmosfl.experiment.config import (
    RUN_SETTINGS,
    ConfigError,
    ExperimentConfig,
    algorithm_options,
    apply_overrides,
    identity,
    parse_override,
)
from cosmosfl.experiment.grid import (
    SWEEP_FILE,
    GridAxis,
    folder_name,
    parse_grid,
    parse_value,
    read_sweep,
    value_text,
)
from cosmosfl.experiment.rundir import write_atomic
from cosmosfl.experiment.summary import exclusion_warning
from cosmosfl.experiment.sweep_progress import SweepClock, SweepReporter

# Keys a grid may not sweep, and where they are set instead.
NOT_SWEPT = {
    "seed": "the seeds come from --seeds",
    "algorithm": "the algorithms come from --algorithms",
    "algorithm.name": "the algorithms come from --algorithms",
    "tracking": "tracking says where runs are logged, not what they compute",
}

__all__ = [  # the sweep's own names, and grid.py's that a Python caller of plan_sweep needs
    "NOT_SWEPT",
    "SWEEP_FILE",
    "GridAxis",
    "SweepCell",
    "SweepOutcome",
    "SweepPlan",
    "SweepRun",
    "check_grid_key",
    "folder_name",
    "parse_grid",
    "parse_value",
    "plan_sweep",
    "read_sweep",
    "run_sweep",
    "sweep_yaml",
    "value_text",
]


def check_grid_key(key: str, base_algorithm: str, algorithms: Sequence[str]) -> None:
    """A grid key must name one setting of the config or of an algorithm in --algorithms."""
    path = key.split(".")
    head = path[0]
    if key in NOT_SWEPT or head in ("seed", "tracking"):
        why = NOT_SWEPT[key if key in NOT_SWEPT else head]
        raise ConfigError(f"--grid {key}: not a grid key ({why})")
    sections = typing.get_type_hints(ExperimentConfig)
    if head in RUN_SETTINGS:
        allowed, where = [head], "the run settings"
    elif head == "algorithm":
        allowed = [f"algorithm.{k}" for k in sorted(algorithm_options(base_algorithm))]
        where = f"the base algorithm section ({base_algorithm})"
    elif head in sections:
        allowed = [f"{head}.{f.name}" for f in dataclasses.fields(sections[head])]
        where = head
    elif head in known_names():
        if head not in algorithms:
            raise ConfigError(
                f"--grid {key} is for {head}, which is not in --algorithms "
                f"({', '.join(algorithms)})"
            )
        allowed = [f"{head}.{k}" for k in sorted(algorithm_options(head))]
        where = head
    else:
        raise ConfigError(
            f"--grid {key}: {head!r} is neither a config key ({', '.join(sections)}) "
            f"nor an algorithm ({', '.join(known_names())})"
        )
    if key not in allowed:
        raise ConfigError(f"--grid {key}: unknown key; allowed in {where}: {', '.join(allowed)}")


@dataclass
class SweepCell:
    """One combination of grid values: a comparison of its own."""

    values: dict[str, Any]
    path: Path
    plan: ComparePlan

    def label(self) -> str:
        return " ".join(f"{k}={value_text(v)}" for k, v in self.values.items())


@dataclass
class SweepRun:
    cell: SweepCell
    run: PlannedRun
    same_as: SweepRun | None = None  # an earlier run of the same experiment (trained once)

    def label(self) -> str:
        return f"{self.cell.label()} {self.run.algorithm} seed {self.run.seed}"


@dataclass
class SweepPlan:
    out: Path
    axes: list[GridAxis]
    algorithms: list[str]
    seeds: list[int]
    overrides: list[str]
    cells: list[SweepCell] = field(default_factory=list)
    runs: list[SweepRun] = field(default_factory=list)

    def describe(self) -> list[str]:
        shared = sum(r.same_as is not None for r in self.runs)
        sizes = " × ".join(f"{len(a.values)} {a.key}" for a in self.axes)
        lines = [
            f"sweep: {sizes} × {len(self.algorithms)} algorithms × {len(self.seeds)} seeds = "
            f"{len(self.runs)} runs into {self.out}"
        ]
        if shared:
            lines.append(
                f"  {shared} of them are the same experiment as an earlier cell's run (a grid "
                "key the algorithm does not have): trained once, linked"
            )
        if self.cells:  # the grid sets its own keys per cell
            lines.append(f"  settings of the first cell ({self.cells[0].label()}):")
            lines += self.cells[0].plan.describe()[1:]
        return lines


def plan_sweep(
    base_raw: dict[str, Any],
    axes: Sequence[GridAxis],
    algorithms: Sequence[str],
    seeds: Sequence[int],
    out: str | Path,
    overrides: Sequence[str] = (),
) -> SweepPlan:
    """Validate every cell's runs (nothing is trained or written); one error lists every bad
    cell."""
    out, axes, algorithms = Path(out), list(axes), list(algorithms)
    parse_algorithms(",".join(algorithms))
    parse_seeds(",".join(map(str, seeds)))
    keys = [a.key for a in axes]
    if not axes or len(set(keys)) != len(keys):
        raise ConfigError(f"--grid must name at least one key, each once (got {', '.join(keys)})")
    common = [o for o in overrides if ".".join(parse_override(o)[0]) not in keys]
    if len(common) != len(overrides):
        twice = [o for o in overrides if o not in common]
        raise ConfigError(f"{', '.join(twice)}: set both by --grid and as an override")
    config_overrides, _ = split_overrides(common, algorithms)
    section = apply_overrides(base_raw, config_overrides).get("algorithm") or {}
    base_algorithm = section.get("name", "cosmos") if isinstance(section, dict) else "cosmos"
    for key in keys:
        check_grid_key(key, str(base_algorithm), algorithms)
    plan = SweepPlan(out, axes, algorithms, list(seeds), list(overrides))
    errors: list[tuple[str, str]] = []
    for combo in itertools.product(*(range(len(a.values)) for a in axes)):
        values = {a.key: a.values[i] for a, i in zip(axes, combo, strict=True)}
        path = out.joinpath(*(a.names[i] for a, i in zip(axes, combo, strict=True)))
        cell_overrides = [f"{k}={value_text(v)}" for k, v in values.items()]
        try:
            cell_plan = plan_compare(base_raw, algorithms, seeds, path, [*common, *cell_overrides])
        except ConfigError as err:
            errors.append((" ".join(cell_overrides), str(err)))
            continue
        plan.cells.append(SweepCell(values, path, cell_plan))
    if errors:
        raise _cells_error(errors, len(plan.cells) + len(errors))
    _link_same_experiments(plan)
    return plan


def _cells_error(errors: list[tuple[str, str]], total: int) -> ConfigError:
    messages = {m for _, m in errors}
    if len(errors) == total and len(messages) == 1:
        return ConfigError(f"every sweep cell: {messages.pop()}")
    lines = [f"{len(errors)} of {total} sweep cells are invalid (nothing has run):"]
    lines += [f"  {cell}: {message}" for cell, message in errors]
    return ConfigError("\n".join(lines))


def _link_same_experiments(plan: SweepPlan) -> None:
    """Flatten the cells' runs; a run whose experiment an earlier run already is points to it
    (unless its folder already holds a run of its own, which is then kept and used)."""
    first: dict[str, SweepRun] = {}
    for cell in plan.cells:
        for run in cell.plan.runs:
            entry = SweepRun(cell, run)
            key = json.dumps(identity(run.config), sort_keys=True, default=str)
            owner = first.get(key)
            own_folder = run.path.exists() and not run.path.is_symlink()
            if owner is not None and not own_folder:
                entry.same_as = owner
            else:
                first.setdefault(key, entry)
            plan.runs.append(entry)


@dataclass
class SweepOutcome:
    plan: SweepPlan
    ran: list[SweepRun]
    skipped: list[SweepRun]
    shared: list[SweepRun]


def run_sweep(
    plan: SweepPlan,
    *,
    force: bool = False,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> SweepOutcome:
    """Run every cell's runs not already finished with the same experiment (the ablation
    report is `cosmosfl.reporting.ablation.write_ablation_report` on `plan.out`).

    As in compare, a finished run with a different config stops the sweep before anything runs
    (naming the keys) unless `force`.
    """
    owners = [r for r in plan.runs if r.same_as is None]
    states = {id(r): run_state(r.run) for r in owners}
    changed = [(r.run, states[id(r)][1]) for r in owners if states[id(r)][0] == "changed"]
    if changed and not force:
        first = next(r for r in owners if r.run is changed[0][0])
        raise changed_error(changed, first.label())
    write_atomic(plan.out / SWEEP_FILE, sweep_yaml(plan, previous=read_sweep(plan.out)))
    for entry in plan.runs:
        if entry.same_as is not None:
            _symlink(entry.run.path, entry.same_as.run.path)
    pending = sum(states[id(r)][0] != "finished" for r in owners)
    clock = SweepClock(total=len(plan.runs), to_run=pending)
    reporter = SweepReporter(clock) if progress else False
    ran, skipped, shared = [], [], []
    for i, entry in enumerate(plan.runs, 1):
        tag = f"[{i}/{len(plan.runs)}]"
        if entry.same_as is not None:
            echo(f"{tag} {entry.label()}: same run as {entry.same_as.label()}")
            shared.append(entry)
            clock.skipped()
            continue
        state = states[id(entry)][0]
        if state == "finished":
            echo(f"{tag} skip {entry.label()}: finished")
            skipped.append(entry)
            clock.skipped()
            continue
        echo(f"{tag} {entry.label()} ... -> {entry.run.path}  ({clock.status()})")
        also = [r.cell.label() for r in plan.runs if r.same_as is entry]
        tags = {
            "sweep": str(plan.out),
            **{f"grid.{k}": value_text(v) for k, v in entry.cell.values.items()},
        }
        if also:
            tags["also_stands_for"] = "; ".join(also)
        tracker = run_tracker(entry.run, plan.out, tags)
        clock.start_run()
        result = execute_run(entry.run, state, tracker, progress=reporter, echo=echo, tag=tag)
        clock.finish_run()
        echo(
            f"{tag} done: mean accuracy of {result.reported_model} "
            f"{result.mean_accuracy():.4f}  ({clock.status()})"
        )
        warning = exclusion_warning(getattr(result, "summary", {}))
        if warning:
            echo(f"{tag} {warning}")
        ran.append(entry)
    return SweepOutcome(plan, ran, skipped, shared)


def _symlink(path: Path, target: Path) -> None:
    """`path` -> `target`, relative, so the sweep folder can be moved as a whole."""
    if path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, path.parent), path, target_is_directory=True)


def sweep_yaml(plan: SweepPlan, previous: dict[str, Any] | None = None) -> str:
    """sweep.yaml for `plan`. When `previous` (the folder's sweep.yaml) describes the same grid
    and overrides, its algorithms, seeds and shared runs are kept too: a sweep run one seed or
    one algorithm at a time (to split it across sessions) still reports every finished run."""
    rel = lambda p: p.relative_to(plan.out).as_posix()  # noqa: E731
    doc = {
        "grid": [{"key": a.key, "values": a.values, "folders": a.names} for a in plan.axes],
        "algorithms": plan.algorithms,
        "seeds": plan.seeds,
        "overrides": plan.overrides,
        "cells": [{"path": rel(c.path), "values": c.values} for c in plan.cells],
        "shared_runs": {
            rel(r.run.path): rel(r.same_as.run.path) for r in plan.runs if r.same_as is not None
        },
        "base": plan.cells[0].plan.base.to_dict() if plan.cells else {},
    }
    if previous and all(previous.get(k) == doc[k] for k in ("grid", "overrides", "base")):
        doc["algorithms"] = [
            *previous.get("algorithms", []),
            *(a for a in doc["algorithms"] if a not in previous.get("algorithms", [])),
        ]
        doc["seeds"] = sorted({*previous.get("seeds", []), *doc["seeds"]})
        doc["shared_runs"] = {**previous.get("shared_runs", {}), **doc["shared_runs"]}
    header = (
        "# cosmosfl sweep: the grid (keys, values, their folders), algorithms, seeds and cells.\n"
        "# shared_runs: runs that are the same experiment as an earlier cell's (a grid key the\n"
        "# algorithm does not have), linked to it instead of trained twice.\n"
    )
    return header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
