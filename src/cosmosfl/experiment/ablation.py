"""`cosmosfl report` on a sweep: final-round accuracy against each swept key, as a table and a
plot per key (the paper's ablations, Figs. 7–9, and its architecture mixtures, Table 3).

The numbers are compare's: per seed, the mean over clients of each client's accuracy in the
last round; then mean ± SEM over seeds (stats.accuracy_rows on each cell's runs), for each
algorithm's reported model and COSMOS's distilled client model f_i^(t,2) beside it. For
algorithms with clusters the table adds K and the clusters' adjusted Rand index against the
true class groups, per seed as recorded in summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosmosfl.experiment.client_gains import GAINS_MD, GAINS_PNG, cells_gains_markdown
from cosmosfl.experiment.contrasts import paired_text
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.rundir import write_atomic
from cosmosfl.experiment.runset import RunSet, algorithm_order, display_name, load_runs, role
from cosmosfl.experiment.stats import accuracy_rows, mean_sem
from cosmosfl.experiment.sweep import read_sweep, value_text

# What a swept setting is, for axis labels (by the key's last part).
SETTING_NAMES = {
    "num_clients": "number of clients",
    "public_fraction": "size of U (fraction of the training data)",
    "lam": "λ, weight of the consistency regulariser r_B",
    "temperature": "temperature T",
    "threshold": "threshold B0 (mean ℓ1 distance)",
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
    "threshold_rule": "rule choosing B0",
    "server_head_init": "initialisation of h_k's last layer",
    "train_augmentation": "crop + flip of private training batches",
    "server_epochs": "server distillation epochs per round",
    "client_weights": "client weights w_i(x)",
    "client_targets": "what clients distill from",
}
# Summary settings shown in the title, and the grid keys that vary them.
TITLE_SETTINGS = {
    "dataset": "data.dataset",
    "partition": "data.partition",
    "alpha": "data.alpha",
    "num_clients": "data.num_clients",
    "rounds": "rounds",
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


def _k_text(ks: list[int]) -> str:
    if not ks:
        return "—"
    if len(set(ks)) == 1:
        return str(ks[0])
    return f"{sum(ks) / len(ks):.2f} ({min(ks)}–{max(ks)})"


def _ari_text(point: Point) -> str:
    if not point.clusters:
        return "—"
    if not point.ari:
        return "n/a"
    mean, sem = mean_sem(point.ari)
    return f"{mean:.3f} ± {sem:.3f}"


def series_name(algorithm: str) -> str:
    return display_name(algorithm) + (" (reference)" if role(algorithm) == "reference" else "")


def table_markdown(sweep: Sweep, key: str) -> str:
    """The numbers of ablation-<key>.png: one row per line and value, in the plot's order,
    with the paired differences Sweep.base and Sweep.versus ask for."""
    others = [k for k in sweep.keys if k != key]
    head = [*others, "algorithm", "evaluated model", key]
    head += ["Top-1 (%), final round, mean ± SEM", "seeds (n)", "K", "ARI"]
    if key in sweep.base:
        head.append(f"− {key} = {value_text(sweep.base[key])}, paired")
    head += [f"− {display_name(a)}, paired" for a in sweep.versus]
    lines = [f"# Final-round accuracy against {key} — {title_line(sweep)}", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for line in lines_for(sweep, key):
        for p in line.points:
            cells = [
                value_text(line.others[k]) if k in line.others else "any (same run)" for k in others
            ]
            cells += [series_name(p.algorithm), p.label[0], value_text(p.values[key])]
            cells += [f"{100 * p.mean:.2f} ± {100 * p.sem:.2f}"]
            cells += [f"{', '.join(map(str, p.seeds))} (n = {len(p.seeds)})"]
            cells += [_k_text(p.clusters), _ari_text(p)]
            if key in sweep.base and key in sweep.shared.get(p.algorithm, []):
                cells.append("same run")
            elif key in sweep.base:
                ref = [q for q in line.points if q.values[key] == sweep.base[key]]
                cells.append(paired_text(p, ref[0] if ref else None))
            for algorithm in sweep.versus:
                ref = [
                    q for q in sweep.points
                    if q.algorithm == algorithm and q.values == p.values
                ]  # fmt: skip
                cells.append(paired_text(p, ref[0] if ref else None))
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *[f"- {n}" for n in table_notes(sweep, key)]]
    return "\n".join(lines) + "\n"


def table_notes(sweep: Sweep, key: str) -> list[str]:
    notes = [
        "Final round: per seed, the mean over clients of each client's accuracy on its own test "
        "split in the last round; then mean ± SEM over seeds (SEM = sample standard deviation "
        "(ddof = 1) / √n; 0 with one seed).",
        "Reported model: COSMOS's cluster model h_π(i), with its client model after local "
        "training f_i^(t,1) and its distilled client model f_i^(t,2) in their own rows; for the "
        "others the model each deploys.",
        "K: clusters found in the last round, per seed (one number when all seeds agree, else "
        "mean (min–max)); ARI: adjusted Rand index of the clusters against the true class "
        "groups, mean ± SEM over seeds (n/a: no true groups for this split); —: no clusters.",
    ]
    if key in sweep.base or sweep.versus:
        notes.append(
            "Paired (− columns): per seed, the row's final-round accuracy minus the other's on "
            'the same seed (seeds both have), then mean ± SEM over seeds; "k of n above": seeds '
            "on which the row is higher. Against an algorithm: its reported model in the same "
            "cell. —: nothing to compare with."
        )
    for algorithm, keys in sweep.shared.items():
        if key in keys:
            notes.append(
                f"{series_name(algorithm)} does not take {key}: its run is the same experiment "
                "for every value (trained once, so its line is flat by construction)."
            )
    return notes + [n for n in sweep.notes]


@dataclass
class AblationReport:
    files: list[Path]
    notes: list[str]
    tables: dict[str, str]

    def text(self) -> str:
        lines = [*self.tables.values()]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"wrote {p}" for p in self.files]
        return "\n".join(lines)


def write_ablation_report(
    root: str | Path, base: dict[str, Any] | None = None, versus: list[str] | None = None
) -> AblationReport:
    """ablation-<key>.md and ablation-<key>.png for every swept key of the sweep in `root`;
    `base` ({key: value}) and `versus` (algorithms) add paired-difference columns."""
    from cosmosfl.experiment.contrasts import set_contrasts

    sweep = load_sweep(root)
    set_contrasts(sweep, base or {}, versus or [])
    return write_sweep_report(sweep)


def cell_heading(sweep: Sweep, values: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {value_text(values[k])}" for k in sweep.keys if k in values)


def write_sweep_report(sweep: Sweep) -> AblationReport:
    """ablation-<key>.md and ablation-<key>.png for every key of `sweep`, and client-gains.md
    and .png where its cells have `local` runs, into sweep.root."""
    from cosmosfl.experiment.plots import plot_ablation, plot_client_gains

    files, tables = [], {}
    for key in sweep.keys:
        tables[key] = table_markdown(sweep, key)
        write_atomic(sweep.root / f"ablation-{key}.md", tables[key])
        files.append(sweep.root / f"ablation-{key}.md")
        files.append(plot_ablation(sweep, key, sweep.root / f"ablation-{key}.png"))
    cells = [(cell_heading(sweep, values), runset) for values, runset in sweep.cells]
    text, panels, notes = cells_gains_markdown(cells, title_line(sweep))
    if panels:
        write_atomic(sweep.root / GAINS_MD, text)
        files.append(sweep.root / GAINS_MD)
        files.append(plot_client_gains(panels, title_line(sweep), sweep.root / GAINS_PNG))
    return AblationReport(files, list(dict.fromkeys([*sweep.notes, *notes])), tables)
