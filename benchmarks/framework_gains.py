"""Which kinds of client model gain from the federation: per framework, each algorithm's
last-round accuracy minus `local`'s, paired (same seed, same client, same test split).

Reads a compare folder (`<dir>/<algorithm>/seed<k>/` run directories, as `cosmosfl compare`
writes them) and prints, per algorithm and client model kind, the mean paired gain over the
seeds (mean ± SEM over seeds of each seed's mean over that kind's clients), the share of
client-seeds that gain and that lose more than one point, and the worst client; then the same
over all clients. Each algorithm is read at its reported model (COSMOS: h_π(i)) and, with
--models, at other evaluation points too (COSMOS's distilled client model f_i^(t,2):
`client_model`).

    python benchmarks/framework_gains.py runs/satellite --models cluster_model,client_model
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np


def last_record(run: Path) -> dict:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return json.loads(lines[-1])


def load(folder: Path) -> dict[str, dict[int, tuple[dict, dict]]]:
    """{algorithm: {seed: (summary, last record)}} of the finished runs under `folder`."""
    runs: dict[str, dict[int, tuple[dict, dict]]] = defaultdict(dict)
    for summary_path in sorted(folder.glob("*/seed*/summary.json")):
        run = summary_path.parent
        summary = json.loads(summary_path.read_text())
        runs[run.parent.name][int(summary["seed"])] = (summary, last_record(run))
    return runs


def mean_sem(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    sem = float(a.std(ddof=1) / math.sqrt(len(a))) if len(a) > 1 else float("nan")
    return float(a.mean()), sem


def gains(
    runs: dict[str, dict[int, tuple[dict, dict]]], algorithm: str, model: str
) -> dict[str, dict[int, list[float]]]:
    """{kind: {seed: [gain of each client of that kind]}} in accuracy points."""
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for seed, (summary, record) in sorted(runs[algorithm].items()):
        if seed not in runs["local"]:
            continue
        base_summary, base = runs["local"][seed]
        base_acc = base["accuracy"][base_summary["reported_model"]]
        mine = record["accuracy"].get(model)
        if mine is None:
            continue
        kinds = summary["client_models"]
        for cid, acc in mine.items():
            reference = base_acc.get(cid)
            if reference is None:
                continue
            kind = str(kinds[str(cid)])
            out[kind][seed].append(100.0 * (acc - reference))
            out["all clients"][seed].append(100.0 * (acc - reference))
    return out


def table(runs: dict, algorithms: list[str], models: list[str]) -> str:
    lines = [
        "| algorithm (model) | client kind | gain over `local` (points) | gain | lose > 1 pt "
        "| worst |",
        "|---|---|---|---|---|---|",
    ]
    for algorithm in algorithms:
        for model in models:
            per_kind = gains(runs, algorithm, model)
            if not per_kind:
                continue
            kinds = [*sorted(k for k in per_kind if k != "all clients"), "all clients"]
            for kind in kinds:
                per_seed = per_kind[kind]
                means = [float(np.mean(v)) for v in per_seed.values()]
                flat = [g for v in per_seed.values() for g in v]
                m, s = mean_sem(means)
                lines.append(
                    f"| {algorithm} ({model}) | {kind} | {m:+.2f} ± {s:.2f} "
                    f"| {np.mean(np.asarray(flat) > 0):.0%} | {np.mean(np.asarray(flat) < -1):.0%} "
                    f"| {min(flat):+.1f} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a compare folder with a local run per seed")
    parser.add_argument("--models", default="", help="evaluation points besides each reported one")
    args = parser.parse_args()
    runs = load(args.folder)
    if "local" not in runs:
        raise SystemExit(f"{args.folder}: no local runs; gains are paired against local")
    extra = [m for m in args.models.split(",") if m]
    print(f"seeds: {sorted(runs['local'])}; clients per seed: see each run's summary.json\n")
    for algorithm in sorted(a for a in runs if a != "local"):
        reported = next(iter(runs[algorithm].values()))[0]["reported_model"]
        models = [reported, *[m for m in extra if m != reported]]
        print(table(runs, [algorithm], models))
        print()


if __name__ == "__main__":
    main()
