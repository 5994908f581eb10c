"""Showing a run's progress: a live phase display and one summary line per round."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class Reporter:
    """Receives engine events; the base class ignores them all."""

    @contextmanager
    def running(self, rounds: int) -> Iterator[None]:
        yield

    def round_start(self, round_num: int, rounds: int) -> None:
        pass

    def phase(self, name: str) -> None:
        pass

    def round_end(self, record: dict[str, Any]) -> None:
        pass

    def log(self, text: str) -> None:
        pass


class SilentReporter(Reporter):
    """Keeps log lines (for tests and callers) but prints nothing."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, text: str) -> None:
        self.lines.append(text)


def format_kb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def summary_line(record: dict[str, Any]) -> str:
    """One line per round: mean accuracy of every evaluated model, K, bytes, time."""
    parts = [f"round {record['round']:>2}"]
    primary = record.get("primary_model")
    top5 = record.get("mean_top5", {})
    for model, acc in record.get("mean_accuracy", {}).items():
        mark = "*" if model == primary else ""
        extra = f" (top5 {top5[model]:.4f})" if model in top5 else ""
        parts.append(f"{model}{mark} {acc:.4f}{extra}")
    if "K" in record:
        parts.append(f"K={record['K']}")
    up, down = record.get("bytes_up", {}), record.get("bytes_down", {})
    if up:
        parts.append(f"up {format_kb(sum(up.values()) / len(up))}/client")
        parts.append(f"down {format_kb(sum(down.values()) / len(down))}/client")
    if record.get("rejected"):
        parts.append(f"rejected {len(record['rejected'])}")
    if record.get("faults"):
        parts.append(f"faults {len({f['client'] for f in record['faults']})} clients")
    parts.append(f"{record['seconds']['total']:.1f} s")
    return "  ".join(parts)


class ConsoleReporter(Reporter):
    """A rich progress bar over rounds with the current phase, and a summary line per round."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(soft_wrap=True)
        self._progress: Progress | None = None
        self._task: Any = None
        self._round = 0
        self._rounds = 0

    @contextmanager
    def running(self, rounds: int) -> Iterator[None]:
        self._rounds = rounds
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} rounds"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._task = self._progress.add_task("starting", total=rounds)
        with self._progress:
            yield
        self._progress = None

    def round_start(self, round_num: int, rounds: int) -> None:
        self._round, self._rounds = round_num, rounds
        self._describe("starting")

    def phase(self, name: str) -> None:
        self._describe(name.replace("_", " "))

    def _describe(self, what: str) -> None:
        if self._progress is not None:
            self._progress.update(
                self._task, description=f"round {self._round}/{self._rounds}: {what}"
            )

    def round_end(self, record: dict[str, Any]) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)
        self.console.print(summary_line(record), highlight=False)

    def log(self, text: str) -> None:
        self.console.print(f"[dim]{text}[/dim]", highlight=False)


def make_reporter(show: bool) -> Reporter:
    """The console reporter when asked to show progress, else a silent one."""
    return ConsoleReporter() if show else SilentReporter()
