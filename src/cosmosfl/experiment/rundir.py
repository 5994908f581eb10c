"""The run directory: resolved config, metrics.jsonl (one record per round), summary.json."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from cosmosfl.experiment.config import ConfigError, ExperimentConfig, dump_config

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
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
        for name in (METRICS, SUMMARY, CHECKPOINT):
            (self.path / name).unlink(missing_ok=True)
        write_atomic(self.path / CONFIG, dump_config(cfg))

    def append_record(self, record: dict[str, Any]) -> None:
        with open(self.path / METRICS, "a") as f:
            f.write(json.dumps(record, sort_keys=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rewrite_records(self, records: list[dict[str, Any]]) -> None:
        """Replace metrics.jsonl with `records` (on resume: the checkpoint's rounds only)."""
        write_atomic(self.path / METRICS, "".join(json.dumps(r) + "\n" for r in records))

    def finish(self, summary: dict[str, Any]) -> None:
        write_atomic(self.path / SUMMARY, json.dumps(summary, indent=2) + "\n")


def read_records(path: str | Path) -> list[dict[str, Any]]:
    with open(Path(path) / METRICS) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_summary(path: str | Path) -> dict[str, Any]:
    return json.loads((Path(path) / SUMMARY).read_text())
