"""Who gains from the federation and who is harmed: each client's last-round accuracy minus
`local`'s, paired on the same seed, client and test split.

Personalised FL is judged per client, and a mean over clients hides the ones that lose. For
each algorithm and evaluation point of a comparison (the rows of stats.accuracy_rows), every
seed gives one gain per client; per seed we take the share of clients that gain, the share
that lose more than one point, the median and the worst gain (and the mean, which is the
paired difference of the accuracy table's means), then mean ± SEM over the seeds. Where a
federation mixes client kinds (architectures or frameworks, as summary.json's
`client_models` records them) the same is computed per kind: the model-agnostic question is
which kinds gain. The pooled gains (every client of every seed) feed the sorted-gain plot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cosmosfl.reporting.runset import Run, RunSet, display_name, role
from cosmosfl.reporting.stats import Row, accuracy_rows, mean_sem

BASELINE = "local"
GAINS_MD, GAINS_PNG = "client-gains.md", "client-gains.png"  # the report's files
ALL_CLIENTS = "all clients"
LOSS_POINTS = 1.0  # "harmed": a loss of more than one accuracy point
# Accuracies are counts over test sizes, so equal ones subtract to exactly 0, but a loss of
# exactly one sample in a hundred comes out as -1.0000000000000009: compare with a margin.
TOLERANCE = 1e-9  # points
# Settings that fix each client's test split (with the seed and the client kinds): a `local`
# run that differs in one of them was not evaluated on the same splits.
SPLIT_KEYS = ("dataset", "partition", "alpha", "num_clients", "num_classes")


@dataclass(frozen=True)
class Stat:
    """One statistic of the per-client gains: mean ± SEM over seeds of its per-seed values."""

    mean: float
    sem: float

    @classmethod
    def over(cls, values: list[float]) -> Stat:
        return cls(*mean_sem(values))


@dataclass
class GainRow:
    """The per-client gains of one algorithm's evaluated model over `local`, for one kind of
    client (or all clients). Shares are fractions; gains are accuracy points."""

    algorithm: str
    model: str
    label: tuple[str, str]  # plain text, LaTeX / mathtext (as the accuracy table's)
    kind: str
    seeds: list[int]
    clients: list[int]  # per seed: how many clients were paired
    gaining: Stat  # share of clients with a gain > 0
    losing: Stat  # share of clients that lose more than LOSS_POINTS
    median: Stat
    worst: Stat
    mean: Stat
    pooled: list[float] = field(repr=False)  # every paired client of every seed


@dataclass
class ClientGains:
    """The gain rows over all clients, the rows per client kind (empty when every client is of
    one kind), and why anything was left out."""

    rows: list[GainRow]
    kind_rows: list[GainRow]
    kinds: list[str]
    notes: list[str]
    has_baseline: bool
    reported_models: dict[str, str] = field(default_factory=dict)  # by algorithm


def client_accuracy(run: Run, model: str) -> dict[str, float]:
    """Last-round accuracy of `model` on each client's own test split, by client id."""
    found = run.records[-1].get("accuracy", {}).get(model) or {}
    return {str(c): float(a) for c, a in found.items()}


def client_kinds(run: Run) -> dict[str, str]:
    """Each client's model kind (its architecture or framework) as the run recorded it."""
    return {str(c): str(k) for c, k in (run.summary.get("client_models") or {}).items()}


def split_mismatch(run: Run, base: Run) -> str | None:
    """Why `run` and the `local` run `base` of its seed were not evaluated on the same test
    splits with the same clients, or None when they were."""
    for key in SPLIT_KEYS:
        if key in run.summary and key in base.summary and run.summary[key] != base.summary[key]:
            return f"{key} {run.summary[key]!r} vs {base.summary[key]!r}"
    mine, theirs = client_kinds(run), client_kinds(base)
    if mine and theirs and mine != theirs:
        return "the client models differ"
    return None


def paired_gains(run: Run, model: str, base: Run) -> dict[str, float]:
    """Per client both runs evaluated, `model`'s accuracy minus `local`'s, in points."""
    reference = client_accuracy(base, reported_model(base))
    mine = client_accuracy(run, model)
    return {c: 100.0 * (mine[c] - reference[c]) for c in mine if c in reference}


def reported_model(run: Run) -> str:
    return str(run.summary.get("reported_model", run.records[-1].get("primary_model")))


def _seed_stats(gains: list[float]) -> tuple[float, float, float, float, float]:
    g = np.asarray(gains, dtype=np.float64)
    return (
        float(np.mean(g > TOLERANCE)),
        float(np.mean(g < -LOSS_POINTS - TOLERANCE)),
        float(np.median(g)),
        float(np.min(g)),
        float(np.mean(g)),
    )


def _row(row: Row, kind: str, per_seed: dict[int, list[float]]) -> GainRow:
    seeds = sorted(s for s, g in per_seed.items() if g)
    stats = [_seed_stats(per_seed[s]) for s in seeds]
    columns = [Stat.over([s[i] for s in stats]) for i in range(5)]
    pooled = [g for s in seeds for g in per_seed[s]]
    clients = [len(per_seed[s]) for s in seeds]
    return GainRow(row.algorithm, row.model, row.label, kind, seeds, clients, *columns, pooled)


def client_gains(runset: RunSet, rows: list[Row] | None = None) -> ClientGains:
    """The paired per-client gains over `local` of every row of the accuracy table (`rows`,
    computed from `runset` when not given) except `local`'s own."""
    bases = {r.seed: r for r in runset.runs.get(BASELINE, [])}
    if not bases:
        note = (
            f"no `{BASELINE}` run in {runset.root}: the per-client gains are paired against "
            f"`{BASELINE}` (same seed, client and test split), so none are reported; add it "
            f"with `cosmosfl compare ... --algorithms {BASELINE} --out {runset.root}` on the same "
            "config and seeds"
        )
        return ClientGains([], [], [], [note], False)
    rows = accuracy_rows(runset) if rows is None else rows
    notes: list[str] = []
    kinds: set[str] = set()
    every: list[tuple[Row, dict[int, dict[str, float]], dict[int, dict[str, str]]]] = []
    for row in rows:
        if row.algorithm == BASELINE:
            continue
        gains: dict[int, dict[str, float]] = {}
        kind_of: dict[int, dict[str, str]] = {}
        for run in runset.runs[row.algorithm]:
            base = bases.get(run.seed)
            if base is None:
                notes.append(
                    f"{display_name(row.algorithm)} seed {run.seed}: no `{BASELINE}` run of "
                    "that seed to pair with"
                )
                continue
            why = split_mismatch(run, base)
            if why is not None:
                notes.append(
                    f"{display_name(row.algorithm)} seed {run.seed}: not paired with "
                    f"`{BASELINE}` ({why}), so not on the same test splits"
                )
                continue
            found = paired_gains(run, row.model, base)
            if found:
                gains[run.seed] = found
                kind_of[run.seed] = client_kinds(run) or client_kinds(base)
                kinds.update(kind_of[run.seed].values())
        if gains:
            every.append((row, gains, kind_of))
    if not every and not notes:
        notes.append(f"no run besides `{BASELINE}` to pair with it")
    gain_rows, kind_rows = [], []
    kind_names = sorted(kinds) if len(kinds) > 1 else []  # one kind: the per-kind table is moot
    for row, gains, kind_of in every:
        gain_rows.append(_row(row, ALL_CLIENTS, {s: list(g.values()) for s, g in gains.items()}))
        for kind in kind_names:
            per_seed = {
                s: [v for c, v in g.items() if kind_of[s].get(c) == kind] for s, g in gains.items()
            }
            if any(per_seed.values()):
                kind_rows.append(_row(row, kind, per_seed))
    reported = {a: reported_model(runs[0]) for a, runs in runset.runs.items()}
    return ClientGains(gain_rows, kind_rows, kind_names, list(dict.fromkeys(notes)), True, reported)


def _pct(stat: Stat) -> str:
    return f"{100 * stat.mean:.1f} ± {100 * stat.sem:.1f}"


def _points(stat: Stat) -> str:
    mean = f"{stat.mean:+.2f}".replace("-0.00", "+0.00")  # no signed zero
    return f"{mean} ± {stat.sem:.2f}"


def _name(row: GainRow) -> str:
    name = display_name(row.algorithm)
    return name + (" (reference)" if role(row.algorithm) == "reference" else "")


def _cells(row: GainRow, kind: bool) -> list[str]:
    cells = [_name(row), row.label[0]]
    cells += [row.kind] if kind else []
    counts = sorted(set(row.clients))
    cells += [", ".join(map(str, counts))]
    cells += [_pct(row.gaining), _pct(row.losing)]
    cells += [_points(row.median), _points(row.worst), _points(row.mean)]
    cells += [f"{', '.join(map(str, row.seeds))} (n = {len(row.seeds)})"]
    return cells


def _table(rows: list[GainRow], kind: bool) -> list[str]:
    head = ["algorithm", "evaluated model", *(["client kind"] if kind else [])]
    head += ["clients per seed", "clients gaining (%)", f"losing > {LOSS_POINTS:g} pt (%)"]
    head += ["median gain (pts)", "worst gain (pts)", "mean gain (pts)", "seeds (n)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    return lines + ["| " + " | ".join(_cells(r, kind)) + " |" for r in rows]


def gains_notes() -> list[str]:
    return [
        f"Gain: a client's last-round accuracy on its own test split minus `{BASELINE}`'s "
        "(its reported model) for the same seed, client and test split, in accuracy points. "
        "Per seed, over its clients: the share that gain (> 0), the share that lose more than "
        f"{LOSS_POINTS:g} point (< −{LOSS_POINTS:g}), the median, the worst (lowest) and the mean "
        "gain; then mean ± SEM over seeds (SEM = sample standard deviation (ddof = 1) / √n; 0 "
        "with one seed).",
        "The mean gain is the paired difference of the accuracy table's means; the shares, the "
        "median and the worst client are what the mean hides.",
    ]


def _body(gains: ClientGains, level: int) -> list[str]:
    """The gain table, and the per-kind table where the clients are of several kinds."""
    if not gains.has_baseline or not gains.rows:
        why = gains.notes[0] if gains.notes else f"nothing to pair with `{BASELINE}`"
        return [f"Skipped: {why}."]
    lines = _table(gains.rows, kind=False)
    if gains.kind_rows:
        lines += ["", f"{'#' * (level + 1)} Per client kind ({', '.join(gains.kinds)})", ""]
        lines += _table(gains.kind_rows, kind=True)
    return lines


def _notes(gains: list[ClientGains]) -> list[str]:
    notes = gains_notes()
    if any(g.kind_rows for g in gains):
        notes.append(
            "Client kind: the client's model as its run's summary.json records it "
            "(`client_models`); per kind, the statistics are over that kind's clients of "
            "each seed."
        )
    return notes


def gains_markdown(gains: ClientGains, title: str) -> str:
    """client-gains.md of a comparison: the gain table (and the per-kind table where the
    clients are of several kinds), or why there is none."""
    lines = [f"# Per-client gain over `{BASELINE}`, final round — {title}", ""]
    lines += _body(gains, level=1)
    if gains.rows:
        lines += ["", *[f"- {n}" for n in [*_notes([gains]), *gains.notes]]]
    return "\n".join(lines) + "\n"


def cells_gains_markdown(
    cells: list[tuple[str, RunSet]], title: str
) -> tuple[str, list[tuple[str, ClientGains]], list[str]]:
    """An ablation's client-gains.md (a section per cell, headed by its grid values: each
    client's gain over `local` in that cell), the cells' gains for the plot, and a note when no
    cell has `local` (then the text is empty)."""
    lines = [f"# Per-client gain over `{BASELINE}` per cell, final round — {title}"]
    panels, notes = [], []
    for heading, runset in cells:
        gains = client_gains(runset)
        lines += ["", f"## {heading}", "", *_body(gains, level=2)]
        panels += [(heading, gains)] if gains.rows else []
        notes += gains.notes if gains.rows else []
    if not panels:
        return "", [], [f"{GAINS_MD} not written: no cell of this ablation has a `local` run"]
    found = [g for _, g in panels]
    lines += ["", *[f"- {n}" for n in [*_notes(found), *dict.fromkeys(notes)]]]
    return "\n".join(lines) + "\n", panels, []


def gains_summary(gains: ClientGains) -> list[str]:
    """One line per algorithm's reported model, for the end of `cosmosfl report`'s output."""
    lines = []
    for row in gains.rows:
        if gains.reported_models.get(row.algorithm) != row.model:
            continue
        lines.append(
            f"{display_name(row.algorithm)} vs `{BASELINE}`, per client: "
            f"{_pct(row.gaining)} % gain, {_pct(row.losing)} % lose > {LOSS_POINTS:g} pt, "
            f"median {_points(row.median)}, worst {_points(row.worst)} pts "
            f"(n = {len(row.seeds)} seeds)"
        )
    return lines


__all__: list[str] = [
    "ALL_CLIENTS",
    "BASELINE",
    "GAINS_MD",
    "GAINS_PNG",
    "LOSS_POINTS",
    "ClientGains",
    "GainRow",
    "Stat",
    "cells_gains_markdown",
    "client_accuracy",
    "client_gains",
    "client_kinds",
    "gains_markdown",
    "gains_notes",
    "gains_summary",
    "paired_gains",
    "split_mismatch",
]
