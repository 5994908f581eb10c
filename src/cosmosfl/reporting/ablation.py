"""`cosmosfl report` on a sweep: final-round accuracy against each swept key, as a table and a
plot per key (the paper's ablations, Figs. 7–9, and its architecture mixtures, Table 3).

The numbers are compare's: per seed, the mean over clients of each client's accuracy in the
last round; then mean ± SEM over seeds (stats.accuracy_rows on each cell's runs), for each
algorithm's reported model and COSMOS's distilled client model f_i^(t,2) beside it. For
algorithms with clusters the table adds K and the clusters' adjusted Rand index against the
true class groups, per seed as recorded in summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cosmosfl.experiment.grid import value_text
from cosmosfl.experiment.rundir import write_atomic
from cosmosfl.reporting.client_gains import GAINS_MD, GAINS_PNG, cells_gains_markdown
from cosmosfl.reporting.contrasts import paired_text, set_contrasts
from cosmosfl.reporting.plots import plot_ablation, plot_client_gains
from cosmosfl.reporting.runset import display_name
from cosmosfl.reporting.stats import mean_sem
from cosmosfl.reporting.sweep_data import (
    Point,
    Sweep,
    cell_heading,
    lines_for,
    load_sweep,
    series_name,
    title_line,
)


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
        "Reported model: COSMOS's deployed model (recipe validated) or its cluster model "
        "h_π(i) (recipe paper), with its other evaluation points in their own rows; for the "
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
    sweep = load_sweep(root)
    set_contrasts(sweep, base or {}, versus or [])
    return write_sweep_report(sweep)


def write_sweep_report(sweep: Sweep) -> AblationReport:
    """ablation-<key>.md and ablation-<key>.png for every key of `sweep`, and client-gains.md
    and .png where its cells have `local` runs, into sweep.root."""
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
