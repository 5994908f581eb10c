"""Seeing a partition: a plain-text label table (or, for many classes, a per-client summary),
a CSV of the full client x class matrix and a per-client label-distribution plot."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cosmosfl.data.partition import Partition

__all__ = ["label_summary", "label_table", "plot_label_distribution", "write_label_csv"]

# At most this many of a client's largest classes in a summary row (fewer when they do not fit).
SUMMARY_CLASSES = 5


def label_table(
    partition: Partition,
    y_train: np.ndarray,
    num_classes: int,
    class_names: Sequence[str] | None = None,
) -> str:
    """One row per client (id, group, n_train, n_test, count per class) plus the public set U.

    U's row shows its true labels for inspection only; no algorithm ever sees them. With many
    classes the table is wider than a terminal: see `label_summary`.
    """
    names = _class_names(num_classes, class_names)
    rows = _matrix_rows(partition, y_train, num_classes)
    header = ["client", "group", "n_train", "n_test", *names]
    return _format_table(header, rows)


def label_summary(
    partition: Partition,
    y_train: np.ndarray,
    num_classes: int,
    class_names: Sequence[str] | None = None,
    *,
    width: int = 120,
) -> str:
    """One row per client (and U) that fits in `width` characters, whatever the number of
    classes: sizes, how many classes the client holds, and its largest classes with their share
    of its training samples (as many as fit, at most SUMMARY_CLASSES)."""
    y = np.asarray(y_train)
    names = _class_names(num_classes, class_names)
    counts = partition.label_counts(y, num_classes)
    public = np.bincount(y[partition.public], minlength=num_classes)
    header = ["client", "group", "n_train", "n_test", "classes"]
    fixed: list[list[str]] = []
    for i in range(partition.num_clients):
        fixed.append([*_sizes(partition, counts, i), str(int((counts[i] > 0).sum()))])
    fixed.append(["public", "-", str(len(partition.public)), "-", str(int((public > 0).sum()))])
    widths = [max(len(r[j]) for r in [header, *fixed]) for j in range(len(header))]
    lead = len(_format_row(header, widths)) + 2
    room = max(width - lead, 0)
    lines = [
        _format_row(header, widths) + "  largest classes (share of the row's samples)",
        _format_row(["-" * n for n in widths], widths),
    ]
    for row, row_counts in zip(fixed, [*counts, public], strict=True):
        lines.append(_format_row(row, widths) + "  " + _largest(row_counts, names, room))
    return "\n".join(line.rstrip()[:width] for line in lines)


def write_label_csv(
    partition: Partition,
    y_train: np.ndarray,
    num_classes: int,
    path: str | Path,
    class_names: Sequence[str] | None = None,
) -> Path:
    """The full client x class count matrix as CSV (the rows of `label_table`, U's row last)."""
    names = (
        [str(c) for c in range(num_classes)]
        if class_names is None
        else [str(c) for c in class_names]
    )
    if len(names) != num_classes:
        raise ValueError(f"class_names has {len(names)} names for {num_classes} classes")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["client", "group", "n_train", "n_test", *names])
        writer.writerows(_matrix_rows(partition, y_train, num_classes))
    return out


def _sizes(partition: Partition, counts: np.ndarray, i: int) -> list[str]:
    group = "-" if partition.client_group is None else str(int(partition.client_group[i]))
    return [str(i), group, str(int(counts[i].sum())), str(len(partition.client_test[i]))]


def _matrix_rows(partition: Partition, y_train: np.ndarray, num_classes: int) -> list[list[str]]:
    y = np.asarray(y_train)
    counts = partition.label_counts(y, num_classes)
    rows = [
        [*_sizes(partition, counts, i), *(str(int(v)) for v in counts[i])]
        for i in range(partition.num_clients)
    ]
    public_counts = np.bincount(y[partition.public], minlength=num_classes)
    rows.append(["public", "-", str(len(partition.public)), "-", *map(str, public_counts)])
    return rows


def _format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[j]) for r in [header, *rows]) for j in range(len(header))]
    lines = [_format_row(header, widths), _format_row(["-" * n for n in widths], widths)]
    lines += [_format_row(r, widths) for r in rows]
    return "\n".join(lines)


def _largest(counts: np.ndarray, names: Sequence[str], room: int) -> str:
    """'name share%' of the largest classes, largest first, as many as fit in `room`."""
    total = int(counts.sum())
    if total == 0:
        return "-"
    order = np.argsort(-counts, kind="stable")[:SUMMARY_CLASSES]
    parts: list[str] = []
    for c in order:
        if counts[c] == 0:
            break
        share = 100 * counts[c] / total
        part = f"{names[c]} {share:.0f}%" if share >= 10 else f"{names[c]} {share:.1f}%"
        if parts and len(", ".join([*parts, part])) > room:
            break
        parts.append(part)
    return ", ".join(parts)


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
