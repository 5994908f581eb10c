"""Cold start of one Flower ClientApp message, split into its parts (issue 14, docs/flower.md).

Deployment starts a fresh ClientApp process for every message. Each repeat here starts a fresh
interpreter and times what such a process does before and while serving: the imports, building
the node's client from the dataset (the first message on a node), loading it from the node's
disk cache instead (every later message), restoring the learner's state from `context.state`,
and two tasks (one local epoch, predicting U).

    python benchmarks/flower_cold_start.py -c configs/default.yaml --pid 3 --repeats 3
    python benchmarks/flower_cold_start.py --old e02873f     # the same on another git revision

Medians over repeats, in seconds; run it on an idle machine for absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("imports", "build client", "load from disk cache", "restore state", "train 1 epoch",
         "predict U")  # fmt: skip


def child(config: str, pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    t = time.perf_counter()
    try:  # the module path since the layering change, then the one before it
        from cosmosfl.apps.flower import client_app
        from cosmosfl.apps.flower.settings import AppSettings
    except ImportError:
        from cosmosfl.engines.flower.settings import AppSettings  # type: ignore[no-redef]

        from cosmosfl.engines.flower import client_app  # type: ignore[no-redef]
    from flwr.app import RecordDict

    import cosmosfl.experiment.runner  # noqa: F401  (load_client imports it on a message)
    from cosmosfl.core import protocol

    out["imports"] = time.perf_counter() - t
    settings = AppSettings(Path(config).read_text(), "", True, 30.0, 5.0)
    with tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter()
        client, initial = client_app.load_client(settings, pid, cache)
        out["build client"] = time.perf_counter() - t
        client_app._CLIENTS.clear()
        t = time.perf_counter()
        client, initial = client_app.load_client(settings, pid, cache)
        out["load from disk cache"] = time.perf_counter() - t
    state = RecordDict()
    client_app.save_state(state, initial)
    t = time.perf_counter()
    client.set_state(client_app.load_state(state))
    out["restore state"] = time.perf_counter() - t
    t = time.perf_counter()
    client.handle(protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 1}))
    out["train 1 epoch"] = time.perf_counter() - t
    t = time.perf_counter()
    client.handle(protocol.Message(protocol.PREDICT_PUBLIC))
    out["predict U"] = time.perf_counter() - t
    return out


def measure(src: Path, config: str, pid: int, repeats: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    runs = []
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, __file__, "--child", "-c", config, "--pid", str(pid)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {part: statistics.median(r[part] for r in runs) for part in PARTS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("-c", "--config", default=str(ROOT / "configs" / "default.yaml"))
    p.add_argument("--pid", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--old", help="also measure this git revision (a temporary worktree)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.config, args.pid)))
        return 0
    config = str(Path(args.config).resolve())
    columns = {"this tree": measure(ROOT / "src", config, args.pid, args.repeats)}
    if args.old:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "old"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                            str(tree), args.old], check=True)  # fmt: skip
            try:
                columns[args.old] = measure(tree / "src", config, args.pid, args.repeats)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], check=True)  # fmt: skip
    names = list(columns)
    print(f"| part (median of {args.repeats}, s) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for part in PARTS:
        print(f"| {part} | " + " | ".join(f"{columns[n][part]:.2f}" for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
