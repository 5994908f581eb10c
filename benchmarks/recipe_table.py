"""The table of docs/cosmos.md "Measured" from the folders benchmarks/recipe_evidence.sh
assembles: per shape, COSMOS validated (deployed mix, own model after the gate, h_π(i)),
COSMOS paper (h_π(i)), COMET, FedMD and `local`, paired by seed, against `local` per client.

    python benchmarks/recipe_table.py runs/recipes cifar10-little cifar10-cpu [--round 3]

Reads OUT/<name>/{cosmos,comet,fedmd,local}/seed<s>/metrics.jsonl and
OUT/<name>-paper/cosmos/seed<s>/metrics.jsonl; `--round` takes that round's record instead of
the last (for a shape whose slowest runs stopped early, so every row is read at one round).
Only seeds that `local` has are used; a row says which seeds it holds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROWS = (  # label, folder suffix, algorithm, evaluated model
    ("COSMOS validated, deployed (`deploy: mix`)", "", "cosmos", "deployed"),
    ("COSMOS validated, own model (`deploy: own`)", "", "cosmos", "client_model"),
    ("COSMOS validated, h_π(i)", "", "cosmos", "cluster_model"),
    ("COSMOS paper, h_π(i)", "-paper", "cosmos", "cluster_model"),
    ("COMET", "", "comet", "client_model"),
    ("FedMD", "", "fedmd", "client_model"),
)


def record(run: Path, rnd: int | None) -> dict | None:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return None
    recs = [json.loads(line) for line in path.open()]
    if rnd is None:
        return recs[-1] if (run / "summary.json").is_file() else None
    return next((r for r in recs if r["round"] == rnd), None)


def sem(x: list[float]) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--round", type=int, default=None)
    ap.add_argument("--seeds", default="1,2,3")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        "| shape | algorithm | seeds | Top-1 (%) | − `local` | gain | lose > 1 pt | median "
        "| worst |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.names:
        local = {s: record(args.out / name / "local" / f"seed{s}", args.round) for s in seeds}
        local = {s: r["accuracy"]["client_model"] for s, r in local.items() if r}
        for label, suffix, algo, model in ROWS:
            cols: dict[str, list[float]] = {k: [] for k in ("top", "d", "g", "l", "m", "w")}
            used = []
            for s, ref in local.items():
                r = record(args.out / f"{name}{suffix}" / algo / f"seed{s}", args.round)
                if r is None or model not in r["accuracy"]:
                    continue
                acc = r["accuracy"][model]
                d = np.array([100 * (acc[c] - ref[c]) for c in ref])
                cols["top"].append(100 * float(np.mean(list(acc.values()))))
                cols["d"].append(float(d.mean()))
                cols["g"].append(100 * float((d > 0).mean()))
                cols["l"].append(100 * float((d < -1).mean()))
                cols["m"].append(float(np.median(d)))
                cols["w"].append(float(d.min()))
                used.append(s)
            if not used:
                print(f"| {name} | {label} | none | not measured | | | | | |")
                continue
            m = {k: float(np.mean(v)) for k, v in cols.items()}
            print(
                f"| {name} | {label} | {','.join(map(str, used))} | {m['top']:.2f} ± "
                f"{sem(cols['top']):.2f} | {m['d']:+.2f} ± {sem(cols['d']):.2f} | {m['g']:.1f} % "
                f"| {m['l']:.1f} % | {m['m']:+.2f} | {m['w']:+.2f} |"
            )
        top = [100 * float(np.mean(list(v.values()))) for v in local.values()]
        seeds_run = ",".join(map(str, local))
        print(f"| {name} | `local` | {seeds_run} | {np.mean(top):.2f} ± {sem(top):.2f} | | | | | |")


if __name__ == "__main__":
    main()
