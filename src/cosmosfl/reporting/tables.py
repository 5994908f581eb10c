"""The tables of a comparison report: table.md and table.tex (final-round accuracy, mean ± SEM
over seeds, the † rule, the best round beside it and labelled as not the result) and
communication.md (measured MB per client per round beside FedAvg's cost), with the title line
the figures share.
"""

from __future__ import annotations

from typing import Any

from cosmosfl.reporting.runset import RunSet, display_name, role
from cosmosfl.reporting.stats import DAGGER_RULE, CommRow, Row, dagger_direction

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
        "Reported model: COSMOS's deployed model (recipe validated, the default: each "
        "client's own model after its validation gate) or its cluster model h_π(i) (recipe "
        "paper, the paper's protocol), with its other evaluation points in the rows below; for "
        "the others the model each deploys, as named in the column (docs/baselines.md).",
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
