"""The finished runs of a comparison folder, DIR/<algorithm>/seed<k>/, in the order and with
the roles in which reports show them (COSMOS, the federated baselines, the references)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The order, names and roles of algorithms are the comparison's own (experiment/catalog.py);
# importable from here too.
from cosmosfl.experiment.catalog import (
    PROPOSED,
    algorithm_order,
    display_name,
    role,
)
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.rundir import METRICS, SUMMARY, read_records, read_summary

__all__ = [
    "PROPOSED",
    "Run",
    "RunSet",
    "algorithm_order",
    "display_name",
    "load_runs",
    "role",
]


@dataclass
class Run:
    algorithm: str
    seed: int
    path: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]


@dataclass
class RunSet:
    root: Path
    runs: dict[str, list[Run]]  # by algorithm, in report order; each list sorted by seed
    unfinished: list[Path] = field(default_factory=list)


def load_runs(root: str | Path, nested: bool = False) -> RunSet:
    """Every finished `root/<algorithm>/seed*/` run; unfinished ones are listed, not used.
    `nested` also reads `root/<part>/<algorithm>/seed*/`: a comparison split into one `compare
    --out root/<part>` per algorithm or seed (so that several processes can run it at once).
    Two finished runs of one algorithm and seed are an error: which one to report is not said.
    Not nested by default, so that a folder holding compare folders is not read as one."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"report: directory {str(root)!r} does not exist")
    found: dict[str, list[Run]] = {}
    unfinished: list[Path] = []
    patterns = ("*/seed*", "*/*/seed*") if nested else ("*/seed*",)
    paths = {p for pattern in patterns for p in root.glob(pattern) if p.is_dir()}
    for path in sorted(paths):
        finished = (path / SUMMARY).is_file() and (path / METRICS).is_file()
        records = read_records(path) if finished else []
        if not records:
            unfinished.append(path)
            continue
        summary = read_summary(path)
        name = str(summary.get("algorithm", path.parent.name))
        seed = int(summary.get("seed", path.name.removeprefix("seed") or 0))
        twin = next((r.path for r in found.get(name, []) if r.seed == seed), None)
        if twin is not None:
            raise ConfigError(
                f"report: {str(root)!r} holds two finished runs of {name} seed {seed}: "
                f"{str(twin)!r} and {str(path)!r}; a comparison reports one run per algorithm "
                "and seed (report the folders separately, or give them as cells of an ablation: "
                "`cosmosfl report OUT --key KEY --cell VALUE=DIR ...`)"
            )
        found.setdefault(name, []).append(Run(name, seed, path, summary, records))
    if not found:
        raise ConfigError(
            f"report: no finished runs in {str(root)!r}; expected "
            "<dir>/<algorithm>/seed<k>/ with summary.json and metrics.jsonl "
            "(as written by `cosmosfl compare`)"
        )
    runs = {a: sorted(found[a], key=lambda r: r.seed) for a in algorithm_order(list(found))}
    return RunSet(root, runs, unfinished)
