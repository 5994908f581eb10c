"""The run directory: resolved config, metrics.jsonl (one record per round), summary.json.

metrics.csv holds the same per-client numbers as metrics.jsonl, one row per round × client ×
evaluation point, so that a spreadsheet or `pandas.read_csv` opens them without code. It is
derived from the records and rewritten with them (on resume), so the two never disagree.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from cosmosfl.experiment.config import ConfigError, ExperimentConfig, dump_config

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint.pt"  # written by experiment/checkpoint.py


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

    def prepare(self, cfg: ExperimentConfig, *, force: bool = False) -> None:
        """Create the directory; refuse to overwrite a finished run unless `force`."""
        if self.finished and not force:
            raise ConfigError(
                f"{self.path} already holds a finished run (summary.json exists); "
                "choose another --out or pass --force to overwrite it"
            )
        if (self.path / CHECKPOINT).is_file() and not force:
            raise ConfigError(
                f"{self.path} holds an interrupted run with a checkpoint; continue it with "
                f"`cosmosfl run --resume {self.path}`, or pass --force to start it over"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        for name in (METRICS, METRICS_CSV, SUMMARY, CHECKPOINT):
            (self.path / name).unlink(missing_ok=True)
        write_atomic(self.path / CONFIG, dump_config(cfg))

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
