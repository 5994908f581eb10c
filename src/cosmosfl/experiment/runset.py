"""The finished runs of a comparison folder, DIR/<algorithm>/seed<k>/, and the order and role
in which reports show them (COSMOS, the federated baselines, the references)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.experiment.config import ConfigError, reference_runs
from cosmosfl.experiment.rundir import METRICS, SUMMARY, read_records, read_summary

PROPOSED = "cosmos"


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


def _class_of(algorithm: str) -> type | None:
    return ALGORITHMS.get(algorithm) or reference_runs().get(algorithm)


def display_name(algorithm: str) -> str:
    """How tables and plots name an algorithm or reference run: its class's `display_name`
    ("COSMOS", "FedAvg"); a name nothing registers is shown as it is."""
    return str(getattr(_class_of(algorithm), "display_name", algorithm))


def role(algorithm: str) -> str:
    """'proposed', 'baseline' (federated, compared for †) or 'reference' (a class that
    declares `reference`: `local`, which never communicates, and `centralized`, which pools
    private data)."""
    if algorithm == PROPOSED:
        return "proposed"
    return "reference" if getattr(_class_of(algorithm), "reference", False) else "baseline"


def algorithm_order(names: list[str]) -> list[str]:
    """COSMOS first, then the baselines, then the references; each group in registry order
    (algorithms, then reference runs), then by name."""
    registry = [*ALGORITHMS, *reference_runs()]

    def key(name: str) -> tuple[int, int, str]:
        group = {"proposed": 0, "baseline": 1, "reference": 2}[role(name)]
        return group, registry.index(name) if name in registry else len(registry), name

    return sorted(names, key=key)


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
