"""Reliability measurements: COSMOS under random drop-out, and every soft-label algorithm under
Byzantine clients, against the same runs without faults (docs/reliability.md).

    python benchmarks/reliability.py --dataset digits --seeds 1,2,3
    python benchmarks/reliability.py --dataset cifar10 --data-dir ../shared/data --seeds 1,2,3 \
        --scenarios nofault,dropout --variants cosmos

Runs go to OUT/<dataset>/<scenario>/<variant>/seed<k>/ (default OUT: runs/reliability);
finished runs are skipped and interrupted ones resumed, so rerunning the command continues the
grid and reprints the tables from what is on disk (`--report-only` runs nothing).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from cosmosfl.experiment.compare import plan_compare
from cosmosfl.experiment.config import read_config_file
from cosmosfl.experiment.rundir import read_records
from cosmosfl.experiment.runner import resumable, resume_experiment, run_experiment

CONFIGS = {"digits": "configs/default.yaml", "cifar10": "configs/cifar10-cpu.yaml"}
AVERAGE_LINKAGE = [
    "cosmos.clustering=average-linkage",
    "cosmos.b0_rule=silhouette",
    "cosmos.target_clusters=null",
]
# variant -> (algorithm, per-algorithm overrides as `cosmosfl compare` takes them)
VARIANTS = {
    "cosmos": ("cosmos", []),
    "cosmos-median": ("cosmos", ["cosmos.aggregation=median"]),
    # The defence that keeps K endogenous (issue 15): no cluster budget for the liars to take,
    # K chosen by the silhouette, so a group of liars adds a cluster instead of merging two
    # honest groups.
    "cosmos-al": ("cosmos", AVERAGE_LINKAGE),
    "cosmos-al-median": ("cosmos", [*AVERAGE_LINKAGE, "cosmos.aggregation=median"]),
    # The same with chance-corrected distances (core/clustering.py, "l1-chance"): labels that
    # do not depend on the sample sit at ~1 from everyone, so liars stay alone.
    "cosmos-chance": ("cosmos", [*AVERAGE_LINKAGE, "cosmos.distance=l1-chance"]),
    "cosmos-chance-median": (
        "cosmos",
        [*AVERAGE_LINKAGE, "cosmos.distance=l1-chance", "cosmos.aggregation=median"],
    ),
    "fedmd": ("fedmd", []),
    "comet": ("comet", []),
}
DROPOUT = 0.3
MODES = ("random", "flip", "fixed")
# scenario name -> fraction of Byzantine clients; 20 % keeps the name it had before 10 % existed.
BYZANTINE = {
    **{f"byzantine-{mode}": 0.2 for mode in MODES},
    **{f"byzantine-{mode}-10": 0.1 for mode in MODES},
}
SCENARIOS = {
    "nofault": [],
    "dropout": [f"faults.dropout={DROPOUT}"],
    **{
        name: [f"faults.byzantine={fraction}", f"faults.byzantine_mode={name.split('-')[1]}"]
        for name, fraction in BYZANTINE.items()
    },
}


def run_dir(out: Path, dataset: str, scenario: str, variant: str, seed: int) -> Path:
    return out / dataset / scenario / variant / f"seed{seed}"


def ensure_run(args: argparse.Namespace, scenario: str, variant: str, seed: int) -> Path:
    path = run_dir(args.out, args.dataset, scenario, variant, seed)
    if (path / "summary.json").is_file():
        return path
    algorithm, per = VARIANTS[variant]
    overrides = [*SCENARIOS[scenario], *per, *args.overrides]
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    plan = plan_compare(read_config_file(CONFIGS[args.dataset]), [algorithm], [seed],
                        args.out / "_plan", overrides)  # fmt: skip
    cfg = plan.runs[0].config
    start = time.perf_counter()
    print(f"-- {args.dataset} {scenario} {variant} seed {seed} -> {path}", flush=True)
    if resumable(path, cfg):
        resume_experiment(path, progress=not args.quiet)
    else:
        run_experiment(cfg, path, progress=not args.quiet, force=True)
    print(f"   done in {time.perf_counter() - start:.0f} s", flush=True)
    return path


def final(path: Path) -> dict[str, Any]:
    """Per-client accuracy of the reported model in the last round, clusters, Byzantine ids."""
    summary = json.loads((path / "summary.json").read_text())
    last = read_records(path)[-1]
    return {
        "accuracy": {int(c): a for c, a in last["accuracy"][summary["reported_model"]].items()},
        "clusters": {int(c): k for c, k in last.get("clusters", {}).items()},
        "byzantine": last.get("byzantine", []),
        "cpu": summary.get("wall_seconds"),
    }


def mean_sem(values: list[float]) -> str:
    if not values:
        return "—"
    m = statistics.fmean(values)
    sem = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{100 * m:.2f} ± {100 * sem:.2f}"


def dropout_table(args: argparse.Namespace, variants: list[str], seeds: list[int]) -> str:
    lines = [
        f"| {args.dataset}: variant | no fault | {int(DROPOUT * 100)} % drop-out | "
        "difference (points) | seeds |",
        "|---|---|---|---|---|",
    ]
    for v in variants:
        pairs = []
        for s in seeds:
            a = run_dir(args.out, args.dataset, "nofault", v, s)
            b = run_dir(args.out, args.dataset, "dropout", v, s)
            if (a / "summary.json").is_file() and (b / "summary.json").is_file():
                fa, fb = final(a)["accuracy"], final(b)["accuracy"]
                pairs.append((statistics.fmean(fa.values()), statistics.fmean(fb.values()), s))
        if not pairs:
            continue
        diff = statistics.fmean(b - a for a, b, _ in pairs) * 100
        lines.append(
            f"| {v} | {mean_sem([a for a, _, _ in pairs])} | {mean_sem([b for _, b, _ in pairs])}"
            f" | {diff:+.2f} | {', '.join(str(s) for *_, s in pairs)} |"
        )
    return "\n".join(lines)


def byzantine_table(args: argparse.Namespace, variants: list[str], seeds: list[int]) -> str:
    lines = [
        f"| {args.dataset}: mode | Byzantine | variant | honest, no fault | honest, with liars | "
        "loss (points) | Byzantine-only clusters | seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for scenario in sorted(BYZANTINE, key=lambda name: (BYZANTINE[name], name)):
        for v in variants:
            clean, hit, isolated, seen = [], [], [0, 0], []
            for s in seeds:
                a = run_dir(args.out, args.dataset, "nofault", v, s)
                b = run_dir(args.out, args.dataset, scenario, v, s)
                if not ((a / "summary.json").is_file() and (b / "summary.json").is_file()):
                    continue
                fa, fb = final(a), final(b)
                bad = set(fb["byzantine"])
                honest = [c for c in fb["accuracy"] if c not in bad]
                clean.append(statistics.fmean(fa["accuracy"][c] for c in honest))
                hit.append(statistics.fmean(fb["accuracy"][c] for c in honest))
                seen.append(s)
                if fb["clusters"]:
                    for c in bad:
                        mates = {o for o, k in fb["clusters"].items() if k == fb["clusters"][c]}
                        isolated[0] += mates <= bad
                        isolated[1] += 1
            if not seen:
                continue
            loss = statistics.fmean(c - h for c, h in zip(clean, hit, strict=True)) * 100
            iso = f"{isolated[0]} of {isolated[1]}" if isolated[1] else "n/a"
            lines.append(
                f"| {scenario.split('-')[1]} | {BYZANTINE[scenario]:.0%} | {v} | "
                f"{mean_sem(clean)} | {mean_sem(hit)} | {loss:+.2f} | {iso} | "
                f"{', '.join(map(str, seen))} |"
            )
    return "\n".join(lines)


def fault_free_cost(args: argparse.Namespace, variants: list[str], seeds: list[int]) -> str:
    """Each variant against plain COSMOS without faults, paired by seed: what a defence costs
    when nobody lies (issue 15 asks for at most 0.5 point)."""
    lines = [
        f"| {args.dataset}: variant | COSMOS, no fault | variant, no fault | difference "
        "(points, mean ± SEM) | seeds |",
        "|---|---|---|---|---|",
    ]
    for v in variants:
        if v == "cosmos":
            continue
        pairs = []
        for s in seeds:
            a = run_dir(args.out, args.dataset, "nofault", "cosmos", s)
            b = run_dir(args.out, args.dataset, "nofault", v, s)
            if (a / "summary.json").is_file() and (b / "summary.json").is_file():
                fa, fb = final(a)["accuracy"], final(b)["accuracy"]
                pairs.append((statistics.fmean(fa.values()), statistics.fmean(fb.values()), s))
        if not pairs:
            continue
        diffs = [b - a for a, b, _ in pairs]
        lines.append(
            f"| {v} | {mean_sem([a for a, _, _ in pairs])} | {mean_sem([b for _, b, _ in pairs])}"
            f" | {mean_sem(diffs)} | {', '.join(str(s) for *_, s in pairs)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", choices=sorted(CONFIGS), default="digits")
    p.add_argument("--data-dir")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--out", type=Path, default=Path("runs/reliability"))
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--quiet", "-q", action="store_true")
    p.add_argument("overrides", nargs="*", help="config overrides for every run, e.g. threads=1")
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    scenarios, variants = args.scenarios.split(","), args.variants.split(",")
    for bad in set(scenarios) - set(SCENARIOS) | set(variants) - set(VARIANTS):
        p.error(f"unknown scenario or variant {bad!r}")
    if not args.report_only:
        for scenario in scenarios:
            # Drop-out is measured for COSMOS only (the acceptance question).
            todo = ["cosmos"] if scenario == "dropout" else variants
            for v in todo:
                if v not in variants:
                    continue
                for s in seeds:
                    ensure_run(args, scenario, v, s)
    print(dropout_table(args, variants, seeds))
    print()
    print(byzantine_table(args, variants, seeds))
    print()
    print(fault_free_cost(args, variants, seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
