"""The report's figures: accuracy per round (like the paper's Figure 2), clusters found, and a
sweep's final-round accuracy against each swept key (like the paper's Figs. 7–9).

Drawn on matplotlib's Agg canvas without pyplot, so no display and no global state is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cosmosfl.experiment.grid import value_text
from cosmosfl.reporting.client_gains import BASELINE, LOSS_POINTS, ClientGains
from cosmosfl.reporting.runset import PROPOSED, RunSet, display_name, role
from cosmosfl.reporting.stats import COSMOS_CLIENT_LABEL, curve, model_label
from cosmosfl.reporting.sweep_data import (
    Sweep,
    axis_label,
    is_numeric,
    lines_for,
    others_text,
    series_name,
)
from cosmosfl.reporting.sweep_data import title_line as sweep_title_line
from cosmosfl.reporting.tables import title_line

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=120)
    return path


def plot_curves(runset: RunSet, path: str | Path) -> Path:
    """Mean client accuracy of each algorithm's reported model per round, mean ± SEM over seeds.

    COSMOS's distilled client model f_i^(t,2) is drawn dashed in COSMOS's colour.
    """
    from matplotlib import colormaps

    fig = _figure(9.5, 5.0)
    ax = fig.add_subplot()
    colours = colormaps["tab10"]
    longest = 1
    for i, (algorithm, runs) in enumerate(runset.runs.items()):
        colour, marker = colours(i % 10), MARKERS[i % len(MARKERS)]
        reported = str(runs[0].summary.get("reported_model", "client_model"))
        models = [(reported, ":" if role(algorithm) == "reference" else "-", "")]
        if algorithm == PROPOSED and reported != "client_model":
            models.append(("client_model", "--", f", {COSMOS_CLIENT_LABEL[1]}"))
        for model, style, suffix in models:
            values = 100 * curve(runs, model)
            n, length = values.shape
            longest = max(longest, length)
            mean = values.mean(axis=0)
            sem = values.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(length)
            rounds = np.arange(1, length + 1)
            name = display_name(algorithm)
            if role(algorithm) == "reference":
                name += " (reference)"
            if algorithm == PROPOSED and not suffix:
                name += f", {model_label(model, tex=True)}"
            # Hollow markers of different shapes keep coinciding curves visible.
            ax.plot(rounds, mean, style, color=colour, marker=marker, markersize=6,
                    markerfacecolor="none", label=f"{name}{suffix} (n = {n})")  # fmt: skip
            ax.fill_between(rounds, mean - sem, mean + sem, color=colour, alpha=0.18, linewidth=0)
    ax.set_xlabel("communication round")
    ax.set_ylabel("mean client accuracy, Top-1 (%)")
    ax.set_xticks(np.arange(1, longest + 1, max(1, longest // 10)))
    ax.grid(alpha=0.3)
    fig.suptitle(f"{title_line(runset)}\nmean over seeds, band ± SEM", fontsize="medium")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, Path(path))


def contingency(clusters: dict[str, int], groups: dict[str, int]) -> tuple[Any, Any, np.ndarray]:
    """(true groups, clusters, counts[group, cluster]) over the clients present in both."""
    ids = sorted(set(clusters) & set(groups), key=int)
    g = sorted({int(groups[i]) for i in ids})
    k = sorted({int(clusters[i]) for i in ids})
    counts = np.zeros((len(g), len(k)), dtype=int)
    for i in ids:
        counts[g.index(int(groups[i])), k.index(int(clusters[i]))] += 1
    # Clusters ordered by their majority group: a perfect recovery shows as a diagonal.
    order = sorted(range(len(k)), key=lambda c: (int(np.argmax(counts[:, c])), k[c]))
    return g, [k[c] for c in order], counts[:, order]


def plot_clusters(runset: RunSet, path: str | Path) -> Path | None:
    """Clusters found against the true class groups (first seed), one heatmap per algorithm.

    Drawn for every algorithm whose runs record clusters and the true groups (COSMOS, COMET);
    returns None (and writes nothing) when there is none.
    """
    from sklearn.metrics import adjusted_rand_score

    panels = []
    for algorithm, runs in runset.runs.items():
        s = runs[0].summary
        if s.get("clusters") and s.get("true_groups"):
            panels.append((algorithm, runs[0].seed, s))
    if not panels:
        return None
    fig = _figure(4.0 * len(panels) + 0.4, 4.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (algorithm, seed, s) in zip(axes, panels, strict=True):
        g, k, counts = contingency(s["clusters"], s["true_groups"])
        ids = sorted(set(s["clusters"]) & set(s["true_groups"]), key=int)
        ari = s.get("adjusted_rand_index")
        if ari is None:
            ari = adjusted_rand_score(
                [s["true_groups"][i] for i in ids], [s["clusters"][i] for i in ids]
            )
        ax.imshow(counts, cmap="Blues", vmin=0)  # counts are written in the cells
        for r in range(len(g)):
            for c in range(len(k)):
                dark = counts[r, c] > counts.max() / 2
                ax.text(c, r, str(counts[r, c]), ha="center", va="center",
                        color="white" if dark else "black", fontsize="small")  # fmt: skip
        ax.set_xticks(range(len(k)), [str(x) for x in k])
        ax.set_yticks(range(len(g)), [str(x) for x in g])
        ax.set_xlabel("cluster found")
        ax.set_ylabel("true class group")
        ax.set_title(f"{display_name(algorithm)} (seed {seed})\nARI = {ari:.3f}, K = {len(k)}")
    fig.suptitle(f"clusters vs true class groups — {title_line(runset)}", fontsize="medium")
    return _save(fig, Path(path))


LINE_STYLES = ("-", "--", ":", "-.")


def _gain_lines(ax: Any, gains: ClientGains, colour_of: dict[str, Any]) -> None:
    """Each evaluated model's pooled per-client gains, sorted, against the share of clients."""
    styles: dict[str, int] = {}
    for row in gains.rows:
        values = np.sort(np.asarray(row.pooled, dtype=np.float64))
        # x: the share of clients at or below each gain, so the line crosses 0 at the share
        # that lose and the number of clients per seed does not change the axis.
        x = 100 * (np.arange(len(values)) + 0.5) / len(values)
        reported = gains.reported_models.get(row.algorithm) == row.model
        # The reported model solid; the algorithm's other evaluation points dashed, dotted, …
        style = 0 if reported else 1 + styles.get(row.algorithm, 0)
        styles[row.algorithm] = styles.get(row.algorithm, 0) + (0 if reported else 1)
        name = f"{display_name(row.algorithm)}, {row.label[1]}"
        name += f" (n = {len(row.seeds)} seeds × {max(row.clients)} clients)"
        ax.plot(x, values, LINE_STYLES[style % len(LINE_STYLES)], color=colour_of[row.algorithm],
                drawstyle="steps-mid", linewidth=1.6, label=name)  # fmt: skip
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.axhline(-LOSS_POINTS, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlim(0, 100)
    ax.set_xlabel("clients, sorted by gain (% of clients × seeds)")
    ax.set_ylabel(f"gain over {display_name(BASELINE)}, last round (accuracy points)")
    ax.grid(alpha=0.3)


def _kind_points(ax: Any, gains: ClientGains, colour_of: dict[str, Any]) -> None:
    """Mean gain per client kind of each algorithm's reported model, ± SEM over seeds."""
    rows = [r for r in gains.kind_rows if gains.reported_models.get(r.algorithm) == r.model]
    algorithms = list(dict.fromkeys(r.algorithm for r in rows))
    width = 0.7 / max(1, len(algorithms))
    for a, algorithm in enumerate(algorithms):
        mine = [r for r in rows if r.algorithm == algorithm]
        x = [gains.kinds.index(r.kind) + (a - (len(algorithms) - 1) / 2) * width for r in mine]
        ax.errorbar(x, [r.mean.mean for r in mine], yerr=[r.mean.sem for r in mine],
                    color=colour_of[algorithm], marker=MARKERS[a % len(MARKERS)], linestyle="none",
                    markerfacecolor="none", capsize=3, label=display_name(algorithm))  # fmt: skip
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(gains.kinds)), gains.kinds, rotation=30, ha="right")
    ax.set_ylabel("mean gain (points), ± SEM over seeds")
    ax.set_title("reported models, per client kind", fontsize="medium")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def plot_client_gains(panels: list[tuple[str, ClientGains]], title: str, path: str | Path) -> Path:
    """Each client's last-round gain over `local` (paired: same seed, client, test split),
    sorted, one line per algorithm's evaluated model (its reported model solid), one panel per
    comparison; beside a single comparison of several client kinds, the mean gain per kind."""
    from matplotlib import colormaps

    names = list(dict.fromkeys(r.algorithm for _, g in panels for r in g.rows))
    colour_of = {a: colormaps["tab10"](i % 10) for i, a in enumerate(names)}
    kinds = len(panels) == 1 and bool(panels[0][1].kind_rows)
    columns = 2 if kinds else min(3, len(panels))
    grid_rows = 1 if kinds else -(-len(panels) // columns)
    fig = _figure(6.0 * columns + 3.5, 4.6 * grid_rows)
    axes = fig.subplots(grid_rows, columns, squeeze=False).ravel()
    for ax, (heading, gains) in zip(axes, panels, strict=False):
        _gain_lines(ax, gains, colour_of)
        ax.set_title(heading, fontsize="medium")
        ax.legend(fontsize="x-small", loc="upper left")
    if kinds:
        _kind_points(axes[1], panels[0][1], colour_of)
    for ax in axes[len(panels) + int(kinds) :]:
        ax.set_visible(False)
    fig.suptitle(f"per-client gain over local — {title}", fontsize="medium")
    return _save(fig, Path(path))


def plot_ablation(sweep: Sweep, key: str, path: str | Path) -> Path:
    """Final-round accuracy against the values of `key`, mean ± SEM over seeds as error bars.

    One colour per algorithm and evaluated model (COSMOS: h_π(i) and f_i^(t,2)); with more
    keys, one line style and marker per combination of the other keys' values. Numeric values
    sit on a numeric axis (logarithmic when they span two decades or more), others are
    categories in grid order.
    """
    from matplotlib import colormaps

    values = next(a["values"] for a in sweep.axes if a["key"] == key)
    numeric = is_numeric(values)
    lines = lines_for(sweep, key)
    series = list(dict.fromkeys((ln.algorithm, ln.model) for ln in lines))
    combos = list(dict.fromkeys(tuple(map(value_text, ln.others.values())) for ln in lines))
    fig = _figure(11.5, 5.0)
    ax = fig.add_subplot()
    colours = colormaps["tab10"]
    for line in lines:
        s = series.index((line.algorithm, line.model))
        c = combos.index(tuple(map(value_text, line.others.values())))
        x = [p.values[key] if numeric else values.index(p.values[key]) for p in line.points]
        y = [100 * p.mean for p in line.points]
        err = [100 * p.sem for p in line.points]
        name = f"{series_name(line.algorithm)}, {line.label[1]}"
        if others_text(sweep, line, key):
            name += " — " + others_text(sweep, line, key)
        if key in sweep.shared.get(line.algorithm, []):
            name += ", one run for all values"
        n = sorted({len(p.seeds) for p in line.points})
        name += f" (n = {', '.join(map(str, n))})"
        ax.errorbar(
            x, y, yerr=err, color=colours(s % 10), linestyle=LINE_STYLES[c % len(LINE_STYLES)],
            marker=MARKERS[c % len(MARKERS)], markersize=6, markerfacecolor="none", capsize=4,
            label=name,
        )  # fmt: skip
    if numeric:
        positive = [float(v) for v in values if v > 0]
        if len(positive) == len(values) and max(positive) / min(positive) >= 100:
            ax.set_xscale("log")
        ax.set_xticks(values, [value_text(v) for v in values])
    else:
        labels = [value_text(v) for v in values]
        ax.set_xticks(range(len(values)), labels, rotation=20 if max(map(len, labels)) > 8 else 0)
        ax.set_xlim(-0.5, len(values) - 0.5)
    ax.set_xlabel(axis_label(key))
    ax.set_ylabel("final-round mean client accuracy, Top-1 (%)")
    ax.grid(alpha=0.3)
    # A figure title, not the axes': centred over the axes, a long one was cut off at the left
    # edge once the legend took the right half of the figure.
    fig.suptitle(
        f"accuracy against {key} — {sweep_title_line(sweep)}\n"
        "last round, mean over clients; mean over seeds, error bars ± SEM",
        fontsize="medium",
    )
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, Path(path))
