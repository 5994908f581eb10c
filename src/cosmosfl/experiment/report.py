"""`cosmosfl report`: the finished runs under DIR/<algorithm>/seed<k>/ as tables and plots.

Writes table.md / table.tex (final-round accuracy, mean ± SEM over seeds), communication.md
(measured MB per client per round beside FedAvg's cost), and the figures of plots.py. The
result is always the last round; the best round is shown beside it, labelled as not the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.experiment.config import ConfigError
from cosmosfl.experiment.rundir import METRICS, SUMMARY, read_records, read_summary

PROPOSED = "cosmos"
# Non-federated references, reported after the algorithms: `local` never communicates and
# `centralized` pools private data. Everything else is a federated baseline.
REFERENCES = ("local", "centralized")
DISPLAY = {
    "cosmos": "COSMOS",
    "fedmd": "FedMD",
    "fedct": "FedCT",
    "comet": "COMET",
    "fedavg": "FedAvg",
    "fedprox": "FedProx",
    "ditto": "Ditto",
    "fedbabu": "FedBABU",
    "fedselect": "FedSelect",
    "pfedck": "pFedCK",
    # Our server step (line-searched steepest descent), not the paper's: docs/baselines.md.
    "pfedhn": "pFedHN (modified server step)",
}
# Evaluated models: (plain text, LaTeX / matplotlib mathtext).
MODEL_LABELS = {
    "cluster_model": ("cluster model h_π(i)", r"cluster model $h_{\pi(i)}$"),
    "client_model": ("client model f_i", r"client model $f_i$"),
    "local": ("client model after local training f_i^(t,1)", r"local model $f_i^{(t,1)}$"),
    # Parameter-sharing baselines: the shared model, or each client's personalised model.
    "global_model": ("global model w", r"global model $w$"),
    "personal_model": ("personal model", r"personal model"),
}
COSMOS_LOCAL_LABEL = (
    "client model after local training f_i^(t,1)",
    r"client model after local training $f_i^{(t,1)}$",
)
COSMOS_CLIENT_LABEL = ("distilled client model f_i^(t,2)", r"distilled client model $f_i^{(t,2)}$")
COSMOS_SELECTED_LABEL = (
    "h_π(i) or f_i^(t,1), chosen on validation",
    r"$h_{\pi(i)}$ or $f_i^{(t,1)}$, chosen on validation",
)
MB = 1e6  # bytes


@dataclass
class Run:
    algorithm: str
    seed: int
    path: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]


@dataclass
class RunSet:
    root: Path
    runs: dict[str, list[Run]]  # by algorithm, in report order; each list sorted by seed
    unfinished: list[Path] = field(default_factory=list)


def model_label(model: str, tex: bool = False) -> str:
    text, latex = MODEL_LABELS.get(model, (model, model.replace("_", r"\_")))
    return latex if tex else text


def display_name(algorithm: str) -> str:
    return DISPLAY.get(algorithm, algorithm)


def role(algorithm: str) -> str:
    """'proposed', 'baseline' (federated, compared for †) or 'reference'."""
    if algorithm == PROPOSED:
        return "proposed"
    return "reference" if algorithm in REFERENCES else "baseline"


def algorithm_order(names: list[str]) -> list[str]:
    """COSMOS first, then the baselines (registry order, then by name), then the references."""
    registry = list(ALGORITHMS)

    def key(name: str) -> tuple[int, int, str]:
        group = {"proposed": 0, "baseline": 1, "reference": 2}[role(name)]
        if group == 2:
            return group, REFERENCES.index(name), name
        return group, registry.index(name) if name in registry else len(registry), name

    return sorted(names, key=key)


def load_runs(root: str | Path) -> RunSet:
    """Every finished `root/<algorithm>/seed*/` run; unfinished ones are listed, not used."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"report: directory {str(root)!r} does not exist")
    found: dict[str, list[Run]] = {}
    unfinished: list[Path] = []
    for path in sorted(p for p in root.glob("*/seed*") if p.is_dir()):
        finished = (path / SUMMARY).is_file() and (path / METRICS).is_file()
        records = read_records(path) if finished else []
        if not records:
            unfinished.append(path)
            continue
        summary = read_summary(path)
        name = str(summary.get("algorithm", path.parent.name))
        seed = int(summary.get("seed", path.name.removeprefix("seed") or 0))
        found.setdefault(name, []).append(Run(name, seed, path, summary, records))
    if not found:
        raise ConfigError(
            f"report: no finished runs in {str(root)!r}; expected "
            "<dir>/<algorithm>/seed<k>/ with summary.json and metrics.jsonl "
            "(as written by `cosmosfl compare`)"
        )
    runs = {a: sorted(found[a], key=lambda r: r.seed) for a in algorithm_order(list(found))}
    return RunSet(root, runs, unfinished)


def mean_sem(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (sample std with ddof=1 over √n; 0 for a single value)."""
    n = len(values)
    mean = float(np.mean(values))
    return mean, float(np.std(values, ddof=1) / math.sqrt(n)) if n > 1 else 0.0


def curve(runs: list[Run], model: str, metric: str = "mean_accuracy") -> np.ndarray:
    """(seeds, rounds) mean-over-clients values per round, cut to the rounds all seeds have."""
    series = [[r[metric][model] for r in run.records if model in r.get(metric, {})] for run in runs]
    length = min(len(s) for s in series)
    return np.array([s[:length] for s in series], dtype=np.float64)


@dataclass
class Row:
    """One line of the accuracy table: an algorithm's evaluated model over seeds."""

    algorithm: str
    model: str
    label: tuple[str, str]  # plain text, LaTeX
    seeds: list[int]
    final: list[float]  # per seed: last round, mean over clients
    mean: float
    sem: float
    best_round: int  # of the seed-mean curve (context only, not the result)
    best_value: float
    top5: tuple[float, float] | None = None
    dagger: bool = False

    @property
    def role(self) -> str:
        return role(self.algorithm)


def _row(algorithm: str, runs: list[Run], model: str, label: tuple[str, str]) -> Row:
    final = [float(run.records[-1]["mean_accuracy"][model]) for run in runs]
    mean, sem = mean_sem(final)
    per_round = curve(runs, model).mean(axis=0)
    best = int(np.argmax(per_round))
    top5 = None
    if all(model in run.records[-1].get("mean_top5", {}) for run in runs):
        top5 = mean_sem([float(run.records[-1]["mean_top5"][model]) for run in runs])
    seeds = [run.seed for run in runs]
    return Row(
        algorithm, model, label, seeds, final, mean, sem, best + 1, float(per_round[best]), top5
    )


def accuracy_rows(runset: RunSet) -> list[Row]:
    """The table's rows; COSMOS also gets rows for its client model after local training
    f_i^(t,1), its distilled client model f_i^(t,2) and, with select_on_validation, the model
    each client chose on its validation slice."""
    rows = []
    for algorithm, runs in runset.runs.items():
        model = str(runs[0].summary.get("reported_model", runs[0].records[-1]["primary_model"]))
        rows.append(_row(algorithm, runs, model, (model_label(model), model_label(model, True))))
        # COSMOS's other evaluation points, in protocol order: f_i^(t,1) (after local
        # fine-tuning, where the collaboration may show in the client's own model) and f_i^(t,2).
        points = (
            ("local", COSMOS_LOCAL_LABEL),
            ("client_model", COSMOS_CLIENT_LABEL),
            ("selected", COSMOS_SELECTED_LABEL),  # with select_on_validation only
        )
        for point, label in points:
            present = all(point in r.records[-1]["mean_accuracy"] for r in runs)
            if algorithm == PROPOSED and model != point and present:
                rows.append(_row(algorithm, runs, point, label))
    mark_dagger(rows)
    return rows


def intervals_overlap(a: Row, b: Row) -> bool:
    return a.mean - a.sem <= b.mean + b.sem and b.mean - b.sem <= a.mean + a.sem


DAGGER_RULE = (
    "† on COSMOS's reported model: its interval [mean − SEM, mean + SEM] over seeds overlaps "
    "the interval of no federated baseline (every algorithm except COSMOS and the references "
    "local and centralized); assigned only with at least 2 seeds for every run compared and at "
    "least one baseline. Separation does not say which is higher: compare the means."
)


def mark_dagger(rows: list[Row]) -> None:
    """Set `dagger` on COSMOS's reported row when it is separated from every baseline."""
    proposed = next((r for r in rows if r.role == "proposed"), None)
    baselines = [r for r in rows if r.role == "baseline"]
    if proposed is None or not baselines or min(len(r.seeds) for r in [proposed, *baselines]) < 2:
        return
    proposed.dagger = not any(intervals_overlap(proposed, b) for b in baselines)


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

    def pct(mean_sem: tuple[float, float] | None) -> str:
        return "n/a" if mean_sem is None else f"{100 * mean_sem[0]:.2f}{pm}{100 * mean_sem[1]:.2f}"

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


def dagger_direction(rows: list[Row]) -> str | None:
    """Which side of the baselines a †-marked COSMOS lies on (the rule alone does not say)."""
    proposed = next((r for r in rows if r.dagger), None)
    if proposed is None:
        return None
    means = [r.mean for r in rows if r.role == "baseline"]
    side = "above" if proposed.mean > max(means) else "below"
    side = side if proposed.mean > max(means) or proposed.mean < min(means) else "between"
    return f"Here COSMOS's † interval lies {side} the baselines' intervals."


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


@dataclass
class CommRow:
    """Measured payload per client per round (MB), and what FedAvg would move instead."""

    algorithm: str
    up_mb: float
    down_mb: float
    fedavg_mb: float | None  # parameters × 4 bytes, each way; None when no client is torch
    torch_clients: int
    clients: int


def communication_rows(runset: RunSet) -> list[CommRow]:
    """Mean over clients, rounds and seeds of the bytes each client sent and received."""

    def per_client(runs: list[Run], key: str) -> float:
        per_run = [np.mean([np.mean(list(r[key].values())) for r in run.records]) for run in runs]
        return float(np.mean(per_run))

    # The client models are the same for every algorithm of a comparison: a run whose summary
    # predates `client_parameters` borrows the counts of another run.
    recorded = [
        r.summary["client_parameters"]
        for runs in runset.runs.values()
        for r in runs
        if "client_parameters" in r.summary
    ]
    rows = []
    for algorithm, runs in runset.runs.items():
        own = [r.summary["client_parameters"] for r in runs if "client_parameters" in r.summary]
        params = (own or recorded or [{}])[0]
        counts = [p for p in params.values() if p is not None]
        fedavg = float(np.mean(counts)) * 4 / MB if counts else None
        up, down = per_client(runs, "bytes_up") / MB, per_client(runs, "bytes_down") / MB
        rows.append(CommRow(algorithm, up, down, fedavg, len(counts), len(params)))
    return rows


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

    def text(self) -> str:
        """The summary printed by `cosmosfl report` (and at the end of `cosmosfl compare`)."""
        lines = [self.table]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"wrote {p}" for p in self.files]
        return "\n".join(lines)


def write_report(root: str | Path) -> Report:
    """Read the finished runs under `root` and write the tables and plots into it."""
    from cosmosfl.experiment.plots import plot_clusters, plot_curves
    from cosmosfl.experiment.rundir import write_atomic

    runset = load_runs(root)
    rows = accuracy_rows(runset)
    comm = communication_rows(runset)
    table = table_markdown(runset, rows)
    texts = {"table.md": table, "table.tex": table_latex(runset, rows)}
    texts["communication.md"] = communication_markdown(runset, comm)
    for name, text in texts.items():
        write_atomic(runset.root / name, text)
    files = [runset.root / name for name in texts]
    files.append(plot_curves(runset, runset.root / "curves.png"))
    notes = [f"unfinished run ignored: {p}" for p in runset.unfinished]
    clusters = plot_clusters(runset, runset.root / "clusters.png")
    files += [clusters] if clusters else []
    notes += [] if clusters else ["clusters.png not written: no run with clusters and true groups"]
    return Report(rows, comm, files, notes, table)
