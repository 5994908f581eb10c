"""Seeing a partition: a plain-text label table and a per-client label-distribution plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cosmosfl.data.partition import Partition

__all__ = ["label_table", "plot_label_distribution"]


def label_table(
    partition: Partition,
    y_train: np.ndarray,
    num_classes: int,
    class_names: Sequence[str] | None = None,
) -> str:
    """One row per client (id, group, n_train, n_test, count per class) plus the public set U.

    U's row shows its true labels for inspection only; no algorithm ever sees them.
    """
    y = np.asarray(y_train)
    names = _class_names(num_classes, class_names)
    counts = partition.label_counts(y, num_classes)
    header = ["client", "group", "n_train", "n_test", *names]
    rows: list[list[str]] = []
    for i in range(partition.num_clients):
        group = "-" if partition.client_group is None else str(int(partition.client_group[i]))
        rows.append(
            [
                str(i),
                group,
                str(int(counts[i].sum())),
                str(len(partition.client_test[i])),
                *(str(int(v)) for v in counts[i]),
            ]
        )
    public_counts = np.bincount(y[partition.public], minlength=num_classes)
    rows.append(["public", "-", str(len(partition.public)), "-", *map(str, public_counts)])
    widths = [max(len(r[j]) for r in [header, *rows]) for j in range(len(header))]
    lines = [_format_row(header, widths), _format_row(["-" * n for n in widths], widths)]
    lines += [_format_row(r, widths) for r in rows]
    return "\n".join(lines)


def _class_names(num_classes: int, class_names: Sequence[str] | None) -> list[str]:
    if class_names is None:
        return [str(c) for c in range(num_classes)]
    if len(class_names) != num_classes:
        raise ValueError(f"class_names has {len(class_names)} names for {num_classes} classes")
    return [str(c)[:10] for c in class_names]  # keep wide tables readable


def _format_row(cells: Sequence[str], widths: Sequence[int]) -> str:
    first = cells[0].ljust(widths[0])
    rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
    return "  ".join([first, *rest])


def plot_label_distribution(
    partition: Partition, y_train: np.ndarray, num_classes: int, path: str | Path
) -> Path:
    """Write a PNG of every client's training label counts and return its path.

    Stacked bars (one colour per class) up to 20 classes; a client x class heatmap beyond.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    counts = partition.label_counts(np.asarray(y_train), num_classes)
    n = partition.num_clients
    fig = Figure(figsize=(max(6.0, 0.3 * n + 2), 4.5), layout="constrained")
    FigureCanvasAgg(fig)  # the Agg canvas, without touching pyplot's global state
    ax = fig.add_subplot()
    clients = np.arange(n)
    if num_classes <= 20:
        colours = _colours(num_classes)
        bottom = np.zeros(n)
        for c in range(num_classes):
            ax.bar(clients, counts[:, c], bottom=bottom, color=colours[c], label=str(c), width=0.85)
            bottom += counts[:, c]
        ax.legend(title="class", fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.set_ylabel("training samples")
    else:
        image = ax.imshow(counts.T, aspect="auto", cmap="viridis", interpolation="nearest")
        fig.colorbar(image, ax=ax, label="training samples")
        ax.set_ylabel("class")
    if partition.client_group is not None:
        # Thin lines between consecutive client groups make the paper's block structure visible.
        for i in np.flatnonzero(np.diff(partition.client_group)) + 0.5:
            ax.axvline(i, color="black", linewidth=0.8, linestyle=":")
    ax.set_xlabel("client")
    ax.set_title(f"label distribution: {n} clients, public set of {len(partition.public)}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=100)
    return out


def _colours(k: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if k <= 10 else "tab20"]
    return [cmap(i) for i in range(k)]
