"""How long does a tabular federation's round take, by phase, before and after a change?

    python benchmarks/tabular_rounds.py --data-dir ../shared/data             # everything
    python benchmarks/tabular_rounds.py --data-dir ../shared/data --parts rounds --rounds 3
    python benchmarks/tabular_rounds.py --data-dir ../shared/data --parts scaling --sites 21,50,100

Run by hand (minutes), not a test. Three parts:

- `rounds`: COSMOS on `configs/satellite-mixed.yaml` (21 sites of 7 frameworks, 6 classes) and
  on a many-class table, EMNIST-balanced's 47 classes as pixel-vector rows (the 28x28 images of
  `emnist_balanced_partial.npz` average-pooled by `--pool`, 4 -> 7x7 = 49 values, the first
  `--per-class` rows of each class, written to a CSV in a temporary folder; 14 sites of the same
  7 frameworks in 2 class groups), `--rounds` rounds each, by the revision `--old` (a `git
  worktree add --detach` in a temporary folder) and by the working tree, each `cosmosfl run` in
  its own process with PYTHONPATH at that tree's `src`. Old and new alternate (old, new, old,
  new for `--repeats 2`), so both see the same load on a shared machine. Printed: seconds per
  phase of every round (the records' `seconds`), the old/new ratio of each round's total, and
  the peak RSS of the run's main process (worker processes are forked by a forkserver, so their
  peaks are not counted there; the `memory` part measures a client's work alone).
- `memory`: each framework's peak memory for one client's round of work (fit on its private
  rows, distill on U toward soft targets that give every class some mass, fit again), in a
  fresh process per (revision, table, framework): the peak RSS above the process's RSS before
  the work, beside the client's data (its private inputs plus U, as stored).
- `scaling`: the working tree alone on satellite.csv split among `--sites` sites (the same 7
  frameworks, 3 class groups): seconds per round and peak RSS.
- `floor`: what a later round's client work cannot go below, by the working tree: every
  site's learner fitted once, from scratch, on its private rows plus U labelled with the
  argmax of its own model (hard labels: the cheapest refit on those rows; a later round must
  refit every refit site at least once, on at least those rows), seconds per framework summed
  over its sites, and that sum over the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FRAMEWORKS = (
    "mlp",
    "logistic_regression",
    "random_forest",
    "knn",
    "hist_gradient_boosting",
    "xgboost",
    "lightgbm",
)

# A run in a child process; prints the peak RSS (KiB) of itself and of its largest child.
RUN = """
import json, resource, sys
from cosmosfl.cli.main import main
if __name__ == "__main__":
    code = main(sys.argv[2:])
    peak = {"main_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "worker_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}
    open(sys.argv[1], "w").write(json.dumps(peak))
    sys.exit(code)
"""

# One client of a framework doing a round's work; prints the peak RSS above the start.
CLIENT = """
import gc, json, resource, sys, warnings
import numpy as np
warnings.filterwarnings("ignore")
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import load_config

def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (resource.getpagesize() // 1024)

if __name__ == "__main__":
    out, config, framework = sys.argv[1:4]
    exp = build_experiment(load_config(config, []))
    client = next(c for c, name in zip(exp.clients, exp.client_models) if name == framework)
    u = np.asarray(exp.public_x)
    x, y = client.train
    exp.clients.clear()
    gc.collect()
    start = rss_kib()
    learner = client.learner
    learner.fit(x, y, epochs=1)
    targets = learner.predict_proba(u).astype(np.float64) + 0.01  # every class some mass
    targets /= targets.sum(axis=1, keepdims=True)
    learner.distill(u, targets)
    learner.fit(x, y, epochs=1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    data = np.asarray(x).nbytes + u.nbytes
    result = {"peak_above_start_kib": peak - start, "data_kib": data / 1024}
    open(out, "w").write(json.dumps(result))
"""


# Every site's learner refitted once on its private rows + U with hard labels, timed.
FLOOR = """
import json, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import load_config

if __name__ == "__main__":
    out, config = sys.argv[1:3]
    exp = build_experiment(load_config(config, []))
    u = np.asarray(exp.public_x)
    seconds = {}
    for client, name in zip(exp.clients, exp.client_models):
        x, y = client.train
        x = np.asarray(x).reshape(len(x), -1)
        client.learner.fit(x, y, epochs=1)
        labels = client.learner.predict_proba(u).argmax(axis=1)
        fresh = client.learner.clone()
        rows, targets = np.concatenate([x, u.reshape(len(u), -1)]), np.concatenate([y, labels])
        start = time.perf_counter()
        fresh.fit(rows, targets, epochs=1)
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
    open(out, "w").write(json.dumps(seconds))
"""


def floor(config: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", FLOOR, str(out), str(config)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"floor failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


def write_emnist_table(data_dir: Path, into: Path, pool: int, per_class: int = 0) -> Path:
    """EMNIST-balanced (partial) as a CSV of pooled pixel rows and a class column (the first
    `per_class` rows of each class when given)."""
    import numpy as np

    d = np.load(data_dir / "emnist_balanced_partial.npz")
    x = np.concatenate([d["x_train"], d["x_test"]]).astype(np.float32)[..., 0]
    y = np.concatenate([d["y_train"], d["y_test"]])
    if per_class:
        keep = np.concatenate([np.nonzero(y == c)[0][:per_class] for c in np.unique(y)])
        keep.sort()
        x, y = x[keep], y[keep]
    n, h, w = x.shape
    x = x.reshape(n, h // pool, pool, w // pool, pool).mean(axis=(2, 4)).reshape(n, -1)
    names = [f"p{i}" for i in range(x.shape[1])]
    path = into / "emnist47.csv"
    labels = np.asarray([f"c{int(c):02d}" for c in y])
    with path.open("w") as f:
        f.write(",".join([*names, "class"]) + "\n")
        for row, label in zip(x, labels, strict=True):
            f.write(",".join(f"{v:.4g}" for v in row) + f",{label}\n")
    return path


def configs(into: Path, data_dir: Path, rounds: int) -> dict[str, Path]:
    """The two tables' configs (satellite-mixed's, the many-class one derived from it)."""
    import yaml

    base = yaml.safe_load((REPO / "configs" / "satellite-mixed.yaml").read_text())
    base["rounds"] = rounds
    base["data"]["data_dir"] = str(data_dir)
    many = json.loads(json.dumps(base))
    many["data"].update(dataset="emnist47.csv", num_clients=14, num_groups=2)
    out = {}
    for name, cfg in (("satellite-mixed", base), ("emnist47", many)):
        out[name] = into / f"{name}.yaml"
        out[name].write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


def tree_at(rev: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), rev],
        check=True,
        capture_output=True,
    )
    return into


def run(tree: Path, config: Path, out: Path, overrides: list[str] = ()) -> dict[str, Any]:
    """One `cosmosfl run` by the cosmosfl in `tree`: its records' seconds and its peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    peak = out.with_suffix(".peak.json")
    cmd = [sys.executable, "-c", RUN, str(peak), "run", "-c", str(config), "-o", str(out)]
    cmd += ["--force", "-q", *overrides]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{config.name} failed in {tree}:\n{done.stderr[-3000:]}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"seconds": [r["seconds"] for r in records], **json.loads(peak.read_text())}


def client_peak(tree: Path, config: Path, framework: str, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    cmd = [sys.executable, "-c", CLIENT, str(out), str(config), framework]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{framework} failed in {tree}:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


def print_rounds(table: str, results: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\n## {table}: seconds per round (median of {len(results['new'])} runs)")
    phases = list(results["old"][0]["seconds"][0])
    print("| round | phase | old s | new s | old/new |")
    print("|---|---|---|---|---|")
    for r in range(len(results["old"][0]["seconds"])):
        for phase in phases:
            old = statistics.median(x["seconds"][r].get(phase, 0.0) for x in results["old"])
            new = statistics.median(x["seconds"][r].get(phase, 0.0) for x in results["new"])
            if phase != "total" and old < 0.05 and new < 0.05:
                continue
            ratio = f"{old / new:.1f}x" if new > 0 else "-"
            bold = "**" if phase == "total" else ""
            print(f"| {r + 1} | {bold}{phase}{bold} | {old:.1f} | {new:.1f} | {ratio} |")
    for side in ("old", "new"):
        main = max(x["main_kib"] for x in results[side]) / 1024
        # Worker processes are forked by a forkserver, not by the run's process: their peaks
        # are not in its RUSAGE_CHILDREN (the `memory` part measures a client's work alone).
        print(f"peak RSS {side}: main process {main:.0f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder with satellite.csv and EMNIST")
    parser.add_argument("--old", default="30a0cf6", help="git revision before the change")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="old/new pairs per table")
    parser.add_argument("--tables", default="satellite-mixed,emnist47")
    parser.add_argument("--parts", default="rounds,memory,scaling")
    parser.add_argument("--sites", default="21,50,100")
    parser.add_argument("--pool", type=int, default=4, help="EMNIST pixels pooled per side")
    parser.add_argument(
        "--per-class", type=int, default=0, help="EMNIST rows per class (0: all 9,424 rows)"
    )
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir).resolve()
    parts = set(args.parts.split(","))
    tables = args.tables.split(",")
    with tempfile.TemporaryDirectory(prefix="tabular-rounds-") as tmp:
        base = Path(tmp)
        data = base / "data"
        data.mkdir()
        (data / "satellite.csv").symlink_to(data_dir / "satellite.csv")
        if "emnist47" in tables:
            write_emnist_table(data_dir, data, args.pool, args.per_class)
        cfgs = configs(base, data, args.rounds)
        trees = {"new": REPO}
        if parts & {"rounds", "memory"}:
            trees["old"] = tree_at(args.old, base / "old-tree")
        try:
            if "rounds" in parts:
                for table in tables:
                    results: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
                    for i in range(args.repeats):
                        for side in ("old", "new"):
                            out = base / f"{table}-{side}-{i}"
                            results[side].append(run(trees[side], cfgs[table], out))
                    print_rounds(table, results)
            if "memory" in parts:
                for table in tables:
                    print(f"\n## {table}: one client's round, peak RSS above its start (MiB)")
                    print("| framework | data | old | new | new / data |")
                    print("|---|---|---|---|---|")
                    for framework in FRAMEWORKS:
                        got = {
                            side: client_peak(
                                trees[side], cfgs[table], framework, base / f"m-{side}.json"
                            )
                            for side in ("old", "new")
                        }
                        mib = {side: got[side]["peak_above_start_kib"] / 1024 for side in got}
                        data_mib = got["new"]["data_kib"] / 1024
                        print(
                            f"| {framework} | {data_mib:.1f} | {mib['old']:.1f} | "
                            f"{mib['new']:.1f} | {mib['new'] / data_mib:.1f} |"
                        )
            if "floor" in parts:
                cores = len(os.sched_getaffinity(0))
                for table in tables:
                    got = floor(cfgs[table], base / f"floor-{table}.json")
                    print(f"\n## {table}: one hard-label refit per site on private + U (s)")
                    print("| framework | seconds, all its sites |")
                    print("|---|---|")
                    for name, sec in sorted(got.items(), key=lambda kv: -kv[1]):
                        print(f"| {name} | {sec:.2f} |")
                    total = sum(got.values())
                    spread = f"over {cores} cores: {total / cores:.2f}"
                    print(f"| **all sites** | {total:.2f} ({spread}) |")
            if "scaling" in parts:
                print("\n## satellite.csv among N sites (working tree): seconds per round")
                print("| sites | round 1 s | later rounds s | peak RSS of the main process MiB |")
                print("|---|---|---|---|")
                for sites in [int(s) for s in args.sites.split(",")]:
                    got = run(
                        REPO,
                        cfgs["satellite-mixed"],
                        base / f"scale-{sites}",
                        [f"data.num_clients={sites}"],
                    )
                    later = [s["total"] for s in got["seconds"][1:]]
                    print(
                        f"| {sites} | {got['seconds'][0]['total']:.1f} | "
                        f"{statistics.mean(later) if later else float('nan'):.1f} | "
                        f"{got['main_kib'] / 1024:.0f} |"
                    )
        finally:
            if "old" in trees:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(trees["old"])],
                    capture_output=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
