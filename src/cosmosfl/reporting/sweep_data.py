"""A sweep folder's grid and the numbers of its finished runs, as the ablation tables and plots
read them: a `Point` per grid cell and evaluated model (final-round mean ± SEM over seeds, K
and ARI per seed), a `Line` per series along one key, and the labels both name them with.

The numbers are compare's: per seed, the mean over clients of each client's accuracy in the
last round; then mean ± SEM over seeds (stats.accuracy_rows on each cell's runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.grid import read_sweep, value_text
from cosmosfl.reporting.runset import RunSet, algorithm_order, display_name, load_runs, role
from cosmosfl.reporting.stats import accuracy_rows

# What a swept setting is, for axis labels (by the key's last part).
SETTING_NAMES = {
    "num_clients": "number of clients",
    "public_fraction": "size of U (fraction of the training data)",
    "lam": "λ, weight of the consistency regulariser r_B",
    "temperature": "temperature T",
    "b0": "B0 (mean ℓ1 distance)",
    "threshold": "B0 (mean ℓ1 distance)",  # the deprecated name of b0
    "target_clusters": "target number of clusters",
    "aggregation": "teacher aggregation rule",
    "alpha": "Dirichlet α",
    "server_model": "server model architecture",
    "models": "client architectures",
    "rounds": "communication rounds",
    "num_groups": "number of class groups",
    "trim_fraction": "trimmed-mean fraction",
    "lr": "learning rate",
    "distill_lr": "learning rate on pseudo-labels",
    "mix_fraction": "share of each client's data pooled and dealt back to all",
    "consistency_target": "r_B's clean prediction (live or detached)",
    "neighbour_bn": "BatchNorm statistics in r_B's neighbour pass",
    "b0_rule": "rule choosing B0",
    "threshold_rule": "rule choosing B0",  # the deprecated name of b0_rule
    "server_head_init": "initialisation of h_k's last layer",
    "train_augmentation": "crop + flip of private training batches",
    "server_epochs": "server distillation epochs per round",
    "client_weights": "client weights w_i(x)",
    "client_targets": "what clients distill from",
}


@dataclass
class Point:
    """One algorithm's evaluated model in one grid cell, over seeds."""

    values: dict[str, Any]  # the cell's grid values
    algorithm: str
    model: str
    label: tuple[str, str]  # plain text, LaTeX / mathtext
    seeds: list[int]
    final: list[float]  # per seed: last round, mean over clients
    mean: float
    sem: float
    clusters: list[int] = field(default_factory=list)  # K per seed (clustering algorithms)
    ari: list[float] = field(default_factory=list)  # adjusted Rand index per seed
    summary: dict[str, Any] = field(default_factory=dict, repr=False)  # of the first seed's run

    def series(self) -> tuple[str, str]:
        return self.algorithm, self.model


@dataclass
class Sweep:
    """A sweep folder's grid and the numbers of its finished runs."""

    root: Path
    axes: list[dict[str, Any]]  # sweep.yaml's grid: key, values, folders
    points: list[Point]
    settings: dict[str, Any]  # summary settings of the first finished run (for titles)
    notes: list[str]
    shared: dict[str, list[str]]  # per algorithm: grid keys it does not have (runs shared)
    # What the table's paired-difference columns compare each row with: the same series at
    # a base value of the key, and other algorithms' reported models in the same cell.
    base: dict[str, Any] = field(default_factory=dict)
    versus: list[str] = field(default_factory=list)
    # Each cell's grid values and runs, for the per-client gains over `local` (client_gains.py).
    cells: list[tuple[dict[str, Any], RunSet]] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        return [a["key"] for a in self.axes]


def select_runs(
    runset: RunSet, algorithms: list[str] | None = None, seeds: set[int] | None = None
) -> RunSet:
    """The runs of `runset` of the given algorithms and seeds (all when None)."""
    runs = {
        a: [r for r in rs if seeds is None or r.seed in seeds]
        for a, rs in runset.runs.items()
        if (algorithms is None or a in algorithms)
        and any(seeds is None or r.seed in seeds for r in rs)
    }
    return RunSet(runset.root, runs, runset.unfinished)


def cell_points(
    values: dict[str, Any],
    runset: RunSet,
    algorithms: list[str] | None = None,
    seeds: set[int] | None = None,
) -> list[Point]:
    """One cell's Points: every algorithm's evaluated models over the cell's finished runs
    (only `algorithms` and `seeds` when given)."""
    runs = select_runs(runset, algorithms, seeds).runs
    points = []
    for row in accuracy_rows(RunSet(runset.root, runs)):
        done = runs[row.algorithm]
        points.append(
            Point(
                dict(values),
                row.algorithm,
                row.model,
                row.label,
                row.seeds,
                row.final,
                row.mean,
                row.sem,
                [int(r.summary["K"]) for r in done if r.summary.get("K") is not None],
                [
                    float(r.summary["adjusted_rand_index"])
                    for r in done
                    if r.summary.get("adjusted_rand_index") is not None
                ],
                dict(done[0].summary),
            )
        )
    return points


def load_sweep(root: str | Path) -> Sweep:
    """Every cell's finished runs (of the sweep's algorithms and seeds) as Points."""
    root = Path(root)
    doc = read_sweep(root)
    if doc is None:
        raise ConfigError(f"report: {str(root)!r} holds no sweep.yaml (not a sweep folder)")
    algorithms, seeds = list(doc["algorithms"]), set(doc["seeds"])
    points: list[Point] = []
    notes: list[str] = []
    cells: list[tuple[dict[str, Any], RunSet]] = []
    for cell in doc["cells"]:
        try:
            runset = load_runs(root / cell["path"])
        except ConfigError:
            notes.append(f"cell {cell['path']}: no finished run yet")
            continue
        notes += [f"unfinished run ignored: {p}" for p in runset.unfinished]
        points += cell_points(cell["values"], runset, algorithms, seeds)
        cells.append((dict(cell["values"]), select_runs(runset, algorithms, seeds)))
    settings = dict(points[0].summary) if points else {}
    if not points:
        raise ConfigError(f"report: no finished runs in the sweep {str(root)!r} yet")
    shared: dict[str, list[str]] = {}
    for cell_run, owner in (doc.get("shared_runs") or {}).items():
        algorithm = Path(cell_run).parent.name
        differ = [
            a["key"] for a, mine, theirs in zip(
                doc["grid"], Path(cell_run).parts, Path(owner).parts, strict=False
            ) if mine != theirs
        ]  # fmt: skip
        for key in differ:
            shared.setdefault(algorithm, [])
            if key not in shared[algorithm]:
                shared[algorithm].append(key)
    return Sweep(root, list(doc["grid"]), points, settings, notes, shared, cells=cells)


def is_numeric(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def axis_label(key: str) -> str:
    name = SETTING_NAMES.get(key.split(".")[-1])
    head = key.split(".")[0]
    only = "" if head in ("data", "clients", "algorithm", "faults") or "." not in key else (
        f", {display_name(head)} only"
    )  # fmt: skip
    return f"{name} ({key}{only})" if name else f"{key}{only}"


def title_line(sweep: Sweep) -> str:
    """Dataset, split and the settings the grid does not vary."""
    s = sweep.settings
    swept = set(sweep.keys)
    parts = [] if "data.dataset" in swept else [str(s.get("dataset", "?"))]
    if "data.partition" not in swept:
        part = f"{s.get('partition', '?')} split"
        if s.get("partition") in ("paper", "dirichlet") and "data.alpha" not in swept:
            part += f", α = {s.get('alpha')}"
        parts.append(part)
    if "data.num_clients" not in swept:
        parts.append(f"{s.get('num_clients', '?')} clients")
    if "rounds" not in swept:
        rounds = s.get("rounds", "?")
        parts.append(f"{rounds} round{'' if rounds == 1 else 's'}")
    return ", ".join(parts)


@dataclass
class Line:
    """The points of one plotted line: a series at fixed values of the other keys."""

    algorithm: str
    model: str
    label: tuple[str, str]
    others: dict[str, Any]
    points: list[Point]  # in the order of the key's grid values


def lines_for(sweep: Sweep, key: str) -> list[Line]:
    """One line per (algorithm, evaluated model, values of the other keys), in report order:
    algorithms as in the comparison table, the other keys' values in grid order. An other key
    that an algorithm does not take (its runs are shared across that key's values) does not
    split its line: it would draw the same line once per value."""
    axis = next(a for a in sweep.axes if a["key"] == key)
    order = algorithm_order(list(dict.fromkeys(p.algorithm for p in sweep.points)))
    series = list(dict.fromkeys(p.series() for p in sweep.points))
    series.sort(key=lambda s: order.index(s[0]))  # stable: reported model before f_i
    lines = []
    for algorithm, model in series:
        shared = sweep.shared.get(algorithm, [])
        others = [a for a in sweep.axes if a["key"] != key and a["key"] not in shared]
        combos: list[tuple[Any, ...]] = [()]
        for a in others:
            combos = [(*c, v) for c in combos for v in a["values"]]
        for combo in combos:
            fixed = {a["key"]: v for a, v in zip(others, combo, strict=True)}
            pts = []
            for v in axis["values"]:
                found = [
                    p for p in sweep.points
                    if p.series() == (algorithm, model) and p.values[key] == v
                    and all(p.values[k] == w for k, w in fixed.items())
                ]  # fmt: skip
                pts += found[:1]  # over a shared key's values: the same run, once
            if pts:
                lines.append(Line(algorithm, model, pts[0].label, fixed, pts))
    return lines


def others_text(sweep: Sweep, line: Line, key: str) -> str:
    """The other keys' values of a line, for a legend; a shared key is said to be shared."""
    parts = [f"{k} = {value_text(v)}" for k, v in line.others.items()]
    shared = [k for k in sweep.keys if k != key and k not in line.others]
    parts += [f"same run for every {k}" for k in shared]
    return ", ".join(parts)


def series_name(algorithm: str) -> str:
    return display_name(algorithm) + (" (reference)" if role(algorithm) == "reference" else "")


def cell_heading(sweep: Sweep, values: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {value_text(values[k])}" for k in sweep.keys if k in values)
