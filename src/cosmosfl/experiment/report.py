"""`cosmosfl report`: the finished runs under DIR/<algorithm>/seed<k>/ as tables and plots.

Writes table.md / table.tex (final-round accuracy, mean ± SEM over seeds), communication.md
(measured MB per client per round beside FedAvg's cost), client-gains.md / .png (each client's
gain over `local`, paired; client_gains.py) and the figures of plots.py. The
result is always the last round; the best round is shown beside it, labelled as not the result.
This module renders; runset.py loads the runs and stats.py computes the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosmosfl.experiment.client_gains import (
    GAINS_MD,
    GAINS_PNG,
    ClientGains,
    client_gains,
    gains_markdown,
    gains_summary,
)

# Loading runs and computing their numbers live in runset.py and stats.py; their names are
# importable from here too, as they were before the split.
from cosmosfl.experiment.runset import (
    PROPOSED,
    Run,
    RunSet,
    algorithm_order,
    display_name,
    load_runs,
    role,
)
from cosmosfl.experiment.stats import (
    COSMOS_CLIENT_LABEL,
    COSMOS_LOCAL_LABEL,
    COSMOS_SELECTED_LABEL,
    DAGGER_RULE,
    MB,
    MODEL_LABELS,
    CommRow,
    Row,
    accuracy_rows,
    communication_rows,
    curve,
    dagger_direction,
    intervals_overlap,
    mark_dagger,
    mean_sem,
    model_label,
)

TITLE_KEYS = ("dataset", "partition", "alpha", "num_clients", "rounds", "num_classes")


def _setting_values(runset: RunSet, key: str) -> list[Any]:
    """The values of a summary setting over all runs (first seen first; absent ones skipped)."""
    values = [r.summary[key] for runs in runset.runs.values() for r in runs if key in r.summary]
    return list(dict.fromkeys(values))


def title_line(runset: RunSet) -> str:
    s = {k: (_setting_values(runset, k) or ["?"])[0] for k in TITLE_KEYS}
    parts = [str(s["dataset"]), f"{s['partition']} split"]
    if s["partition"] in ("paper", "dirichlet"):
        parts.append(f"α = {s['alpha']}")
    return ", ".join([*parts, f"{s['num_clients']} clients", f"{s['rounds']} rounds"])


def setting_differences(runset: RunSet) -> list[str]:
    """Settings of the title that differ between runs (they should not, in a comparison)."""
    notes = []
    for key in TITLE_KEYS:
        values = _setting_values(runset, key)
        if len(values) > 1:
            notes.append(f"runs differ in {key}: {', '.join(map(str, values))}")
    return notes


def _num_classes(runset: RunSet) -> int:
    return max(int(r.summary.get("num_classes", 0)) for v in runset.runs.values() for r in v)


def _table_cells(runset: RunSet, rows: list[Row], tex: bool) -> list[list[str]]:
    """Header and rows of the accuracy table, in plain text or LaTeX."""
    top5 = _num_classes(runset) >= 20
    pm, dagger = (r" $\pm$ ", r"$^\dagger$") if tex else (" ± ", " †")

    def pct(value: tuple[float, float] | None) -> str:
        return "n/a" if value is None else f"{100 * value[0]:.2f}{pm}{100 * value[1]:.2f}"

    head = ["algorithm", "evaluated model", "Top-1 (%), final round, mean ± SEM"]
    head += ["Top-5 (%), final round"] if top5 else []
    table = [[*map(_tex, head)] if tex else head]
    table[0] += ["seeds (n)", "best round (not the result)"]
    for row in rows:
        name = display_name(row.algorithm) + (" (reference)" if row.role == "reference" else "")
        cells = [_tex(name) if tex else name, row.label[1 if tex else 0]]
        cells += [pct((row.mean, row.sem)) + (dagger if row.dagger else "")]
        cells += [pct(row.top5)] if top5 else []
        cells += [f"{', '.join(map(str, row.seeds))} (n = {len(row.seeds)})"]
        table.append([*cells, f"{100 * row.best_value:.2f} (round {row.best_round})"])
    return table


def table_markdown(runset: RunSet, rows: list[Row]) -> str:
    head, *body = _table_cells(runset, rows, tex=False)
    lines = [f"# Personalized accuracy, final round — {title_line(runset)}", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    lines += ["", *[f"- {note}" for note in table_notes(runset, rows)]]
    return "\n".join(lines) + "\n"


def table_notes(runset: RunSet, rows: list[Row]) -> list[str]:
    direction = dagger_direction(rows)
    return [
        "Final round: per seed, the mean over clients of each client's accuracy on its own test "
        "split in the last round; then mean ± SEM over seeds (SEM = sample standard deviation "
        "(ddof = 1) / √n; 0 with one seed).",
        "Reported model: COSMOS's cluster model h_π(i) (the paper's protocol), with its client "
        "model after local training f_i^(t,1) and its distilled client model f_i^(t,2) in the "
        "rows below; for the others the model each deploys, as named in the column "
        "(docs/baselines.md).",
        DAGGER_RULE + (f" {direction}" if direction else ""),
        "Best round: the round with the highest seed-mean accuracy; context only, not the result.",
        "References, not federated methods: local (no communication) and centralized (one model "
        "trained on the pooled private data of all clients).",
        *setting_differences(runset),
    ]


def _tex(text: str) -> str:
    """Plain report text as LaTeX (ASCII only, so pdflatex needs no extra packages)."""
    for a, b in (
        ("h_π(i)", "$h\0{\\pi(i)}$"), ("f_i^(t,2)", "$f\0i^{(t,2)}$"), ("f_i", "$f\0i$"),
        ("√n", r"$\sqrt{n}$"),
        ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"),
        ("α", r"$\alpha$"), ("±", r"$\pm$"), ("−", "$-$"), ("√", r"$\sqrt{\,}$"),
        ("†", r"$^\dagger$"), ("π", r"$\pi$"), ("—", "---"),
    ):  # fmt: skip
        text = text.replace(a, b)
    return text.replace("\0", "_")  # the underscores of the math above


def table_latex(runset: RunSet, rows: list[Row]) -> str:
    """A booktabs table with the notes of table.md in its caption."""
    head, *body = _table_cells(runset, rows, tex=True)
    caption = " ".join(_tex(n) for n in table_notes(runset, rows))
    out = [r"\begin{table}[t]", r"\centering"]
    out.append(
        f"\\caption{{Personalized accuracy, final round ({_tex(title_line(runset))}). {caption}}}"
    )
    out += [f"\\begin{{tabular}}{{ll{'r' * (len(head) - 4)}lr}}", r"\toprule"]
    out += [" & ".join(cells) + r" \\" for cells in [head]] + [r"\midrule"]
    out += [" & ".join(cells) + r" \\" for cells in body]
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"


def _mb(x: float) -> str:
    return "0" if x == 0 else f"{x:.4g}"


def communication_markdown(runset: RunSet, rows: list[CommRow]) -> str:
    lines = [
        f"# Communication per client per round — {title_line(runset)}",
        "",
        "| algorithm | up (MB) | down (MB) | FedAvg-equivalent, each way (MB) "
        "| up + down vs FedAvg |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if row.algorithm == "centralized":  # no protocol: nothing to compare with FedAvg
            fedavg, ratio = "—", "—"
        elif row.fedavg_mb is None:
            why = "no torch client" if row.clients else "parameter counts not recorded"
            fedavg, ratio = f"n/a ({why})", "n/a"
        else:
            fedavg = _mb(row.fedavg_mb)
            if row.torch_clients < row.clients:
                fedavg += f" ({row.torch_clients} of {row.clients} clients)"
            ratio = f"{(row.up_mb + row.down_mb) / (2 * row.fedavg_mb):.3g}×"
        name = display_name(row.algorithm)
        if row.algorithm == "centralized":
            name += " (reference: pools private data, no protocol)"
        elif role(row.algorithm) == "reference":
            name += " (reference)"
        lines.append(f"| {name} | {_mb(row.up_mb)} | {_mb(row.down_mb)} | {fedavg} | {ratio} |")
    lines += [
        "",
        "- Measured: bytes of every array payload the engine delivered, per client and direction,"
        " mean over clients, rounds and seeds (MB = 10^6 bytes).",
        "- FedAvg-equivalent: the mean trainable-parameter count of the clients' torch models × 4"
        " bytes (float32), sent up and down every round (as in the paper's Table 4). Non-torch"
        " clients have no parameters to average (n/a); a mixed federation counts its torch"
        " clients only.",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class Report:
    """What `write_report` produced: the numbers, the files and anything worth a warning."""

    rows: list[Row]
    communication: list[CommRow]
    files: list[Path]
    notes: list[str]
    table: str
    gains: ClientGains | None = field(default=None, repr=False)

    def text(self) -> str:
        """The summary printed by `cosmosfl report` (and at the end of `cosmosfl compare`)."""
        lines = [self.table]
        lines += gains_summary(self.gains) if self.gains else []
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"wrote {p}" for p in self.files]
        return "\n".join(lines)


def write_report(root: str | Path) -> Report:
    """Read the finished runs under `root` and write the tables and plots into it."""
    from cosmosfl.experiment.plots import plot_client_gains, plot_clusters, plot_curves
    from cosmosfl.experiment.rundir import write_atomic

    runset = load_runs(root)
    rows = accuracy_rows(runset)
    comm = communication_rows(runset)
    table = table_markdown(runset, rows)
    texts = {"table.md": table, "table.tex": table_latex(runset, rows)}
    texts["communication.md"] = communication_markdown(runset, comm)
    gains = client_gains(runset, rows)
    if gains.rows:
        texts[GAINS_MD] = gains_markdown(gains, title_line(runset))
    for name, text in texts.items():
        write_atomic(runset.root / name, text)
    files = [runset.root / name for name in texts]
    files.append(plot_curves(runset, runset.root / "curves.png"))
    notes = [f"unfinished run ignored: {p}" for p in runset.unfinished]
    clusters = plot_clusters(runset, runset.root / "clusters.png")
    files += [clusters] if clusters else []
    notes += [] if clusters else ["clusters.png not written: no run with clusters and true groups"]
    if gains.rows:
        files.append(plot_client_gains([("", gains)], title_line(runset), runset.root / GAINS_PNG))
    else:
        notes.append(f"{GAINS_MD} and {GAINS_PNG} not written: {gains.notes[0]}")
    notes += gains.notes if gains.rows else gains.notes[1:]
    return Report(rows, comm, files, notes, table, gains)


__all__ = [  # the report's own names, and those of runset.py and stats.py it re-exports
    "COSMOS_CLIENT_LABEL",
    "COSMOS_LOCAL_LABEL",
    "COSMOS_SELECTED_LABEL",
    "DAGGER_RULE",
    "MB",
    "MODEL_LABELS",
    "PROPOSED",
    "TITLE_KEYS",
    "CommRow",
    "Report",
    "Row",
    "Run",
    "RunSet",
    "accuracy_rows",
    "algorithm_order",
    "communication_markdown",
    "communication_rows",
    "curve",
    "dagger_direction",
    "display_name",
    "intervals_overlap",
    "load_runs",
    "mark_dagger",
    "mean_sem",
    "model_label",
    "role",
    "setting_differences",
    "table_latex",
    "table_markdown",
    "table_notes",
    "title_line",
    "write_report",
]
