"""The run directory: resolved config, metrics.jsonl (one record per round), summary.json.

A folder is a run directory only when cosmosfl made it: `prepare` leaves a marker file
(`.cosmosfl-run`) there, and never writes over a file of the names it uses (config.yaml,
metrics.*, summary.json, ...) in a folder without the marker unless forced: those are the
user's own. One process writes a run directory at a time (`locked`: a lock file naming the
process id and host, removed on exit; a lock whose process is gone is stale and taken over).

metrics.csv holds the same per-client numbers as metrics.jsonl, one row per round × client ×
evaluation point, so that a spreadsheet or `pandas.read_csv` opens them without code. It is
derived from the records and rewritten with them (on resume), so the two never disagree.
"""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cosmosfl.experiment.config import ConfigError, ExperimentConfig, dump_config

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint.pt"  # written by experiment/checkpoint.py
TRACKING = "tracking.json"  # written by experiment/tracking.py
CLIENT_ERROR = "client-error.txt"  # the traceback of a client whose code raised
MARKER = ".cosmosfl-run"  # "cosmosfl made this folder"
LOCK = ".cosmosfl-lock"  # "a cosmosfl process is writing this folder": pid and host
OWN_FILES = (CONFIG, METRICS, METRICS_CSV, SUMMARY, CHECKPOINT, TRACKING, CLIENT_ERROR)
UNREADABLE_LOCK_SECONDS = 60.0  # a lock file still empty after this long is a killed writer's


class RunDirectoryError(ConfigError):
    """The run directory cannot be used: a file, unwritable, someone else's, or busy."""


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a crash never leaves a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunDirectory:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def finished(self) -> bool:
        return (self.path / SUMMARY).is_file()

    @property
    def ours(self) -> bool:
        """Whether cosmosfl made this folder (it holds the marker file)."""
        return (self.path / MARKER).is_file()

    def check_usable(self) -> None:
        """One-line errors for a path that cannot be a run directory (a file, under a file,
        unwritable), before any work."""
        path = self.path
        if path.exists() and not path.is_dir():
            raise RunDirectoryError(
                f"{path} is a file, not a folder; give --out a folder (it is created if needed)"
            )
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise RunDirectoryError(
                f"cannot make the run directory {path}: {existing} is a file; choose another --out"
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise RunDirectoryError(
                f"cannot write the run directory {path}: {existing} is not writable by this "
                "user; choose another --out"
            )

    def check_free(self, *, force: bool = False) -> None:
        """Refuse (unless `force`) a folder holding a run, or files cosmosfl did not write."""
        self.check_usable()
        if force:
            return
        if self.finished:
            raise RunDirectoryError(
                f"{self.path} already holds a finished run (summary.json exists); "
                "choose another --out or pass --force to overwrite it"
            )
        if (self.path / CHECKPOINT).is_file():
            raise RunDirectoryError(
                f"{self.path} holds an interrupted run with a checkpoint; continue it with "
                f"`cosmosfl run --resume {self.path}`, or pass --force to start it over"
            )
        if not self.ours:
            theirs = [n for n in OWN_FILES if (self.path / n).exists()]
            if theirs:
                raise RunDirectoryError(
                    f"{self.path} holds {', '.join(theirs)}, which cosmosfl did not write (no "
                    f"{MARKER} marker); cosmosfl never writes over them: choose another --out "
                    "(a new or empty folder), or pass --force to overwrite them"
                )
            return
        rounds = self.recorded_rounds()
        if rounds:
            raise RunDirectoryError(
                f"{self.path} holds an interrupted run ({rounds} round(s) recorded in "
                f"{METRICS}, no checkpoint to resume from); pass --force to start it over, or "
                "choose another --out"
            )

    def recorded_rounds(self) -> int:
        """How many round records metrics.jsonl holds (0 when there is none)."""
        try:
            with open(self.path / METRICS) as f:
                return sum(1 for line in f if line.strip())
        except OSError:
            return 0

    def prepare(self, cfg: ExperimentConfig, *, force: bool = False) -> None:
        """Create the directory and mark it as cosmosfl's; refuse (unless `force`) to overwrite
        a run, or files of the names a run writes that cosmosfl did not write."""
        self.check_free(force=force)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            for name in (METRICS, METRICS_CSV, SUMMARY, CHECKPOINT, CLIENT_ERROR):
                (self.path / name).unlink(missing_ok=True)
            write_atomic(self.path / MARKER, json.dumps({"made_by": "cosmosfl"}) + "\n")
            write_atomic(self.path / CONFIG, dump_config(cfg))
        except OSError as err:
            raise RunDirectoryError(f"cannot write the run directory {self.path}: {err}") from None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's lock for the block: a second writer is refused with one line.

        The lock file names this process (pid, host); it is removed when the block ends, by an
        exception or Ctrl-C too. A process killed outright leaves it behind: a lock whose
        process no longer runs on this host is stale, and is taken over."""
        self.check_usable()
        lock = self.path / LOCK
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            for _ in range(3):
                try:
                    fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    holder = read_lock(lock)
                    if lock_is_stale(lock, holder):
                        lock.unlink(missing_ok=True)
                        continue
                    raise RunDirectoryError(_busy_message(self.path, holder)) from None
                with os.fdopen(fd, "w") as f:
                    f.write(json.dumps(me) + "\n")
                break
            else:
                raise RunDirectoryError(_busy_message(self.path, read_lock(lock)))
        except OSError as err:
            raise RunDirectoryError(f"cannot write the run directory {self.path}: {err}") from None
        try:
            yield
        finally:
            if read_lock(lock) == me:  # never remove a lock another process took over
                lock.unlink(missing_ok=True)

    def append_record(self, record: dict[str, Any]) -> None:
        csv_path = self.path / METRICS_CSV
        new_csv = not csv_path.is_file() or csv_path.stat().st_size == 0
        for name, text in (
            (METRICS, json.dumps(record, sort_keys=False) + "\n"),
            (METRICS_CSV, metrics_csv([record], header=new_csv)),
        ):
            with open(self.path / name, "a", newline="") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())

    def rewrite_records(self, records: list[dict[str, Any]]) -> None:
        """Replace metrics.jsonl (and metrics.csv) with `records` (on resume: the checkpoint's
        rounds only)."""
        write_atomic(self.path / METRICS, "".join(json.dumps(r) + "\n" for r in records))
        write_atomic(self.path / METRICS_CSV, metrics_csv(records))

    def finish(self, summary: dict[str, Any]) -> None:
        write_atomic(self.path / SUMMARY, json.dumps(summary, indent=2) + "\n")


def read_lock(lock: Path) -> dict[str, Any] | None:
    """The holder a lock file names ({pid, host, since}), or None when it cannot be read."""
    try:
        holder = json.loads(lock.read_text())
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) and "pid" in holder else None


def lock_is_stale(lock: Path, holder: dict[str, Any] | None) -> bool:
    """A lock is stale when its process is gone (on this host), or when it was left empty by
    a writer killed while making it; a lock held on another host is never judged stale."""
    if holder is None:
        try:
            return time.time() - lock.stat().st_mtime > UNREADABLE_LOCK_SECONDS
        except OSError:
            return True  # removed meanwhile
    if holder.get("host") != socket.gethostname():
        return False
    pid = int(holder["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # a live process of another user
        return False
    return False


def _busy_message(path: Path, holder: dict[str, Any] | None) -> str:
    who = (
        f"process {holder['pid']} on {holder.get('host', '?')}"
        if holder is not None
        else "another process"
    )
    return (
        f"{path} is being written by another cosmosfl run ({who}); wait for it to finish or "
        f"choose another --out (if no such process runs, delete {path / LOCK})"
    )


CSV_COLUMNS = (
    "round", "client", "model", "reported", "accuracy", "top5",
    "cluster", "K", "bytes_up", "bytes_down",
)  # fmt: skip


def metrics_csv(records: list[dict[str, Any]], *, header: bool = True) -> str:
    """The records as CSV rows: one per round × client × evaluated model.

    `reported` marks the model the algorithm reports (COSMOS: the cluster model h_π(i)); bytes
    are the client's traffic in that round, repeated on each of its model rows. Empty cells:
    no Top-5 (fewer than 20 classes), no clusters (not a clustering algorithm).
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(CSV_COLUMNS)
    for rec in records:
        top5 = rec.get("top5", {})
        clusters = rec.get("clusters") or {}
        up, down = rec.get("bytes_up", {}), rec.get("bytes_down", {})
        for model, per_client in rec.get("accuracy", {}).items():
            for client, acc in per_client.items():
                writer.writerow([
                    rec.get("round"), client, model, int(model == rec.get("primary_model")),
                    acc, top5.get(model, {}).get(client, ""), clusters.get(client, ""),
                    rec.get("K", ""), up.get(client, ""), down.get(client, ""),
                ])  # fmt: skip
    return out.getvalue()


def read_records(path: str | Path) -> list[dict[str, Any]]:
    with open(Path(path) / METRICS) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_summary(path: str | Path) -> dict[str, Any]:
    return json.loads((Path(path) / SUMMARY).read_text())
