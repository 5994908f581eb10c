"""`cosmosfl report`: the finished runs under DIR/<algorithm>/seed<k>/ as tables and plots.

Writes table.md / table.tex (final-round accuracy, mean ± SEM over seeds), communication.md
(measured MB per client per round beside FedAvg's cost), client-gains.md / .png (each client's
gain over `local`, paired; client_gains.py) and the figures of plots.py. The
result is always the last round; the best round is shown beside it, labelled as not the result.
This module assembles the report; runset.py loads the runs, stats.py computes the numbers and
tables.py renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cosmosfl.experiment.rundir import write_atomic
from cosmosfl.reporting.client_gains import (
    GAINS_MD,
    GAINS_PNG,
    ClientGains,
    client_gains,
    gains_markdown,
    gains_summary,
)
from cosmosfl.reporting.decisions import DECISIONS_MD, decision_rows, decisions_markdown
from cosmosfl.reporting.plots import plot_client_gains, plot_clusters, plot_curves

# Loading runs, computing their numbers and rendering the tables live in runset.py, stats.py
# and tables.py; their names are importable from here too, as they were before the split.
from cosmosfl.reporting.privacy import PRIVACY_MD, privacy_markdown
from cosmosfl.reporting.runset import (
    PROPOSED,
    Run,
    RunSet,
    algorithm_order,
    display_name,
    load_runs,
    role,
)
from cosmosfl.reporting.stats import (
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
from cosmosfl.reporting.tables import (
    TITLE_KEYS,
    communication_markdown,
    setting_differences,
    table_latex,
    table_markdown,
    table_notes,
    title_line,
)


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
    runset = load_runs(root)
    rows = accuracy_rows(runset)
    comm = communication_rows(runset)
    table = table_markdown(runset, rows)
    flagged = degenerate_notes(runset)
    if flagged:  # a broken client model must not pass as a weak result
        table += "\n" + "".join(f"- **flagged**: {n}\n" for n in flagged)
    texts = {"table.md": table, "table.tex": table_latex(runset, rows)}
    texts["communication.md"] = communication_markdown(runset, comm)
    gains = client_gains(runset, rows)
    if gains.rows:
        texts[GAINS_MD] = gains_markdown(gains, title_line(runset))
    decisions = decision_rows(runset)
    if decisions:
        texts[DECISIONS_MD] = decisions_markdown(decisions, title_line(runset))
    privacy = privacy_markdown(runset)
    if privacy is not None:
        texts[PRIVACY_MD] = privacy
    for name, text in texts.items():
        write_atomic(runset.root / name, text)
    files = [runset.root / name for name in texts]
    files.append(plot_curves(runset, runset.root / "curves.png"))
    notes = [f"unfinished run ignored: {p}" for p in runset.unfinished] + flagged
    clusters = plot_clusters(runset, runset.root / "clusters.png")
    files += [clusters] if clusters else []
    notes += [] if clusters else ["clusters.png not written: no run with clusters and true groups"]
    if gains.rows:
        files.append(plot_client_gains([("", gains)], title_line(runset), runset.root / GAINS_PNG))
    else:
        notes.append(f"{GAINS_MD} and {GAINS_PNG} not written: {gains.notes[0]}")
    notes += gains.notes if gains.rows else gains.notes[1:]
    return Report(rows, comm, files, notes, table, gains)


def degenerate_notes(runset: RunSet) -> list[str]:
    """One line per run whose summary flags degenerate client models (`degenerate_clients`)."""
    out = []
    for name, runs in runset.runs.items():
        for run in runs:
            bad = run.summary.get("degenerate_clients") or {}
            if bad:
                first = next(iter(bad))
                out.append(
                    f"{name} seed {run.seed}: {len(bad)} degenerate client model(s) (client "
                    f"{first}, {bad[first]['model']!r}: {bad[first]['reason']}); its accuracy "
                    "is that of a broken model"
                )
    return out


__all__ = [  # the report's own names, and those of runset, stats and tables it re-exports
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
