"""The default `workers: auto` against today's default and a serial `threads: 1` run, at 1 and
2 cores (taskset), in one invocation. Run by hand (minutes), not a test:

    .venv/bin/python benchmarks/parallel_default.py --data-dir ../shared/data [--rounds 1]

Each cell is one `cosmosfl run` of configs/cifar10-cpu.yaml in a fresh process pinned to the
first N cores, so its wall time includes start-up (imports, data, worker start); the round
time is the record's. Variants: `auto` (the default: workers auto, threads unset = 1 each),
`today` (workers: 1, threads unset = torch's default, the old default), `serial-1`
(workers: 1, threads: 1). It also checks that `auto` gives `serial-1`'s records at every core
count (timings aside). Prints a Markdown table for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "auto (new default)": [],
    "today (workers 1, torch threads)": ["workers=1", "threads=null"],
    "serial threads 1": ["workers=1", "threads=1"],
}


def records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in lines]


def run(cores: int, overrides: list[str], args: argparse.Namespace, out: Path) -> dict:
    cosmosfl = str(Path(sys.executable).with_name("cosmosfl"))
    cpu_list = ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:cores])
    command = [
        "taskset", "-c", cpu_list, cosmosfl, "run", "-c", str(ROOT / args.config),
        f"data.data_dir={args.data_dir}", f"rounds={args.rounds}", *overrides,
        "--out", str(out), "--force",
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    lines = (out / "metrics.jsonl").read_text().splitlines()
    rounds = [json.loads(line)["seconds"] for line in lines]
    header = next((ln for ln in proc.stdout.splitlines() if ln.startswith("workers:")), "")
    return {
        "wall": wall,
        "round": sum(r.get("total", sum(r.values())) for r in rounds) / len(rounds),
        "server": sum(r.get("server_distillation", 0.0) for r in rounds) / len(rounds),
        "records": records(out),
        "header": header,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--config", default="configs/cifar10-cpu.yaml")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cores", default="1,2", help="core counts to pin to, e.g. 1,2,4")
    args = parser.parse_args()
    args.data_dir = str(Path(args.data_dir).resolve())
    cores = [int(c) for c in args.cores.split(",")]
    work = Path(tempfile.mkdtemp(prefix="parallel-default-"))
    results: dict[tuple[int, str], dict] = {}
    try:
        for n in cores:
            for name, overrides in VARIANTS.items():
                r = run(n, overrides, args, work / f"{n}-{len(results)}")
                results[n, name] = r
                print(f"{n} core(s), {name}: {r['wall']:.1f} s wall, {r['round']:.1f} s/round "
                      f"[{r['header']}]", file=sys.stderr, flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| cores | variant | wall s | s / round | server distillation s | vs today |")
    print("|---|---|---|---|---|---|")
    for n in cores:
        today = results[n, "today (workers 1, torch threads)"]["round"]
        for name in VARIANTS:
            r = results[n, name]
            print(f"| {n} | {name} | {r['wall']:.1f} | {r['round']:.1f} | {r['server']:.1f} | "
                  f"{today / r['round']:.2f}x |")  # fmt: skip
    same = {
        n: results[n, "auto (new default)"]["records"] == results[n, "serial threads 1"]["records"]
        for n in cores
    }
    auto = [results[n, "auto (new default)"]["records"] for n in cores]
    print(f"\nauto's records equal serial threads 1's: {same}; "
          f"equal across core counts: {all(a == auto[0] for a in auto)}")  # fmt: skip
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
