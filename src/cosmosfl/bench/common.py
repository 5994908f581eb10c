"""What every benchmark shares: timing side by side, machine facts, tables and JSON output.

These machines are noisy (shared cores), so benchmarks compare variants inside one process,
interleaved (A B A B ...), and report medians and ratios; absolute figures are labelled as
machine-specific.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


def machine() -> dict[str, Any]:
    """The facts that absolute figures depend on."""
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def interleaved(
    variants: dict[str, Callable[[], Any]], repeats: int = 3, warmup: bool = True
) -> dict[str, list[float]]:
    """Seconds of each variant over `repeats` rounds, variants interleaved within each round so
    that load changes hit all of them alike."""
    if warmup:
        for fn in variants.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return times


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


@dataclass
class Report:
    """A benchmark's result: a title, table rows, notes, and everything as JSON."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def table(self) -> str:
        cells = [[_fmt(v) for v in row] for row in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(self.columns)]
        line = "| " + " | ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True))
        out = [line + " |", "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        for row in cells:
            out.append(
                "| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |"
            )
        return "\n".join(out)

    def text(self) -> str:
        parts = [f"## {self.title}", "", self.table()]
        if self.notes:
            parts += ["", *(f"- {n}" for n in self.notes)]
        return "\n".join(parts)

    def write(self, out_dir: str | Path) -> Path:
        path = Path(out_dir) / f"{self.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "benchmark": self.name,
            "title": self.title,
            "machine": machine(),
            "columns": self.columns,
            "rows": self.rows,
            "notes": self.notes,
            "data": self.data,
        }
        path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        return path


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != v:  # NaN
            return "-"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3g}"
    return str(v)
