"""A sweep's overall progress: runs done of all, and an ETA from the runs finished so far.

The ETA counts only runs trained in this invocation (skipped and shared runs take no time),
so it is honest from the first finished run on and unknown before it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from cosmosfl.engines.progress import ConsoleReporter


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


@dataclass
class SweepClock:
    """Counts runs done and estimates the time left: mean seconds of the runs trained so far
    × runs still to train, less the time the current run has already taken."""

    total: int
    to_run: int  # runs that still need training
    done: int = 0
    durations: list[float] = field(default_factory=list)
    _started: float | None = None

    def skipped(self) -> None:
        self.done += 1

    def start_run(self) -> None:
        self._started = time.perf_counter()

    def finish_run(self) -> None:
        if self._started is not None:
            self.durations.append(time.perf_counter() - self._started)
        self._started = None
        self.done += 1
        self.to_run -= 1

    def eta(self) -> float | None:
        if not self.durations:
            return None
        running = time.perf_counter() - self._started if self._started is not None else 0.0
        mean = sum(self.durations) / len(self.durations)
        return max(0.0, mean * self.to_run - running)

    def status(self) -> str:
        eta = self.eta()
        if self.to_run == 0:
            left = "nothing left to train"
        elif eta is None:
            left = "ETA after the first run"
        else:
            left = f"ETA {format_duration(eta)}"
        return f"{self.done}/{self.total} runs done, {left}"


class SweepReporter(ConsoleReporter):
    """The per-round display of the current run, under a bar of the whole sweep."""

    def __init__(self, clock: SweepClock) -> None:
        super().__init__()
        self.clock = clock
        self._sweep: Any = None

    @contextmanager
    def running(self, rounds: int) -> Iterator[None]:
        self._rounds = rounds
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} {task.fields[unit]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._sweep = self._progress.add_task(
            self._sweep_text(), total=self.clock.total, completed=self.clock.done, unit="runs"
        )
        self._task = self._progress.add_task("starting", total=rounds, unit="rounds")
        with self._progress:
            yield
        self._progress = None

    def _sweep_text(self) -> str:
        eta = self.clock.eta()
        return "sweep" + (f", ETA {format_duration(eta)}" if eta is not None else "")

    def round_end(self, record: dict[str, Any]) -> None:
        if self._progress is not None:
            self._progress.update(self._sweep, description=self._sweep_text())
        super().round_end(record)
