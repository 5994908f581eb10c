"""cosmosfl side by side with the official COSMOS code (issue 14, part 1; benchmarks/README.md).

One invocation builds ONE split of CIFAR-10 with cosmosfl's paper partitioner, hands the same
tensors to the official code (benrachmut/cluster_fed_learning, COSMOS = `MAPL`, driven round by
round by benchmarks/reference_driver.py under its own interpreter) and runs both interleaved:
official round, cosmosfl round, official round, ... so that both see the same machine load.

- Same work: the official 32-px "AlexNet" clients and server on both sides (cosmosfl's
  `alexnet`), epochs 5 / 5 / 5 (local / server / client distillation), batch 32, the same
  learning rates and torch thread count. Seconds per round by phase and the ratio.
- Same answer: per-round mean own-cluster accuracy (the official `server_accuracy_per_client_1`,
  not its `_max` oracle) against cosmosfl's cluster-model accuracy; B, K and the clusters.
- Time to accuracy: cosmosfl with its recommended CPU settings (configs/cifar10-cpu.yaml) on
  the same split until it reaches the official code's final own-cluster accuracy.

    python benchmarks/reference.py --ref-dir ../refbench/ref/cfl \\
        --ref-python ../refbench/refvenv/bin/python --data-dir ../shared/data

Nothing is fetched at run time. Without the official checkout or its interpreter (flags, or
$COSMOSFL_REF_DIR / $COSMOSFL_REF_PYTHON) it prints one line saying why and exits with status
3 (EXIT_SKIPPED), writing nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).resolve().with_name("reference_driver.py")
EXIT_SKIPPED = 3
OFFICIAL_COMMIT = "3bb87f2"
# What the official code needs beyond the standard library (checked before anything runs).
REF_IMPORTS = "import torch, torchvision, numpy, pandas, scipy, sklearn, matplotlib, PIL"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--ref-dir",
        default=os.environ.get("COSMOSFL_REF_DIR"),
        help="checkout of the official code (default $COSMOSFL_REF_DIR)",
    )
    p.add_argument("--ref-python", default=os.environ.get("COSMOSFL_REF_PYTHON"),
                   help="its interpreter: torch 2.14.1, torchvision 0.29.1, numpy<2 "
                   "(default $COSMOSFL_REF_PYTHON)")  # fmt: skip
    p.add_argument("--data-dir", help="folder with cifar10_jpeg.npz")
    p.add_argument("--config", default=str(ROOT / "configs" / "cifar10-cpu.yaml"),
                   help="cosmosfl's recommended settings (time to accuracy)")  # fmt: skip
    p.add_argument(
        "--dataset",
        choices=("digits32", "cifar10"),
        default="digits32",
        help="digits32: scikit-learn's digits at 32x32 RGB (no file needed); cifar10: the real "
        "CIFAR-10 (cifar10_jpeg.npz in --data-dir)",
    )
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--max-train", type=int, default=300, help="training images used (with U)")
    p.add_argument("--public-size", type=int, default=32, help="|U|, a multiple of 32 (batch)")
    p.add_argument("--test-per-client", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--lam",
        type=float,
        default=0.0,
        help="cosmosfl's λ in the same-work run (0: the official r_B has no gradient)",
    )
    p.add_argument("--tta-rounds", type=int, default=60, help="most rounds for time to accuracy")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--work", help="folder for the split and the official code's log and JSON")
    return p.parse_args(argv)


def skip_reason(ref_dir: str | None, ref_python: str | None) -> str | None:
    """Why the benchmark cannot run here (None: it can)."""
    if not ref_dir:
        return "no official checkout: pass --ref-dir or set COSMOSFL_REF_DIR"
    if not (Path(ref_dir) / "main_.py").is_file() or not (Path(ref_dir) / "entities.py").is_file():
        return f"--ref-dir {ref_dir!r} is not a checkout of the official code (no main_.py)"
    if not ref_python:
        return "no interpreter for the official code: pass --ref-python or set COSMOSFL_REF_PYTHON"
    if not os.access(ref_python, os.X_OK):
        return f"--ref-python {ref_python!r} is not an executable"
    probe = subprocess.run([ref_python, "-c", REF_IMPORTS], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"--ref-python {ref_python!r} cannot import what the official code needs: {last}"
    return None


def ref_commit(ref_dir: str) -> str | None:
    out = subprocess.run(
        ["git", "-C", ref_dir, "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    reason = skip_reason(a.ref_dir, a.ref_python)
    if reason is not None:
        print(f"reference benchmark skipped: {reason}", file=sys.stderr)
        return EXIT_SKIPPED
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import reference_report as R  # beside this file; imports torch and cosmosfl

    work = Path(a.work or tempfile.mkdtemp(prefix="cosmosfl-reference-"))
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    same, recommended = R.build_pair(a, work)
    split = R.write_split(same, work / "split.pt")
    result: dict[str, Any] = {"split": split, "settings": vars(a) | {"work": str(work)}}
    result["official_commit"] = ref_commit(a.ref_dir)
    result["same_work"] = run_interleaved(a, same, work, result)
    result["time_to_accuracy"] = R.time_to_accuracy(a, recommended, result["same_work"])
    result["wall_seconds"] = time.perf_counter() - t_start
    report = R.render(result)
    print(report)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "reference.json"
    path.write_text(json.dumps(R.with_machine(result), indent=1, default=str) + "\n")
    (out / "reference.md").write_text(report + "\n")
    print(f"\nwrote {path} and reference.md")
    return 0


class Official:
    """The official code in its own interpreter, one round per `go`."""

    def __init__(self, a: argparse.Namespace, split_path: Path, work: Path) -> None:
        read, write = os.pipe()
        cmd = [a.ref_python, "-W", "ignore", str(DRIVER), "--split", str(split_path),
               "--rounds", str(a.rounds), "--threads", str(a.threads), "--seed", str(a.seed),
               "--epochs", str(a.epochs), "--proto-fd", str(write),
               "--log", str(work / "official.log")]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(Path(a.ref_dir).resolve())}
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, text=True, cwd=work, env=env, pass_fds=(write,),
            stderr=open(work / "official.stderr", "w"),  # noqa: SIM115
        )  # fmt: skip
        os.close(write)
        self.replies = os.fdopen(read)
        self.stderr = work / "official.stderr"

    def ask(self, command: str | None, kind: str) -> dict[str, Any]:
        if command is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        line = self.replies.readline()
        if not line:
            self.proc.wait()
            tail = self.stderr.read_text().strip().splitlines()[-5:]
            raise RuntimeError(f"the official code stopped ({self.proc.returncode}): {tail}")
        reply = json.loads(line)
        if reply["kind"] != kind:
            raise RuntimeError(f"expected a {kind!r} reply, got {reply['kind']!r}")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def run_interleaved(
    a: argparse.Namespace, same: Any, work: Path, result: dict[str, Any]
) -> dict[str, Any]:
    """Official round t, then cosmosfl's round t+1, for every round; AlexNet step times of
    both torch builds first (interleaved too), so the ratio can be read against them."""
    import reference_report as R
    import torch

    official = Official(a, work / "split.pt", work)
    try:
        ready = official.ask(None, "ready")
        steps: dict[str, list[float]] = {"official": [], "cosmosfl": []}
        for _ in range(2):
            steps["official"] += official.ask("bench 3", "bench")["seconds"]
            steps["cosmosfl"] += R.alexnet_steps(3)
        engine = R.engine_for(same, a.seed)
        official_rounds, ours = [], []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(a.seed)  # as cosmosfl.simulate does
            for t in range(a.rounds):
                official_rounds.append(official.ask("go", "round"))
                start, cpu = time.perf_counter(), time.process_time()
                record = engine.run_round(same.algorithm, t + 1, a.rounds)
                record["wall"] = time.perf_counter() - start
                record["cpu"] = time.process_time() - cpu
                ours.append(record)
                print(R.progress(official_rounds[-1], record), flush=True)
        engine.close()
        done = official.ask(None, "done")
    finally:
        official.close()
    return {
        "official_ready": ready,
        "alexnet_step_seconds": steps,
        "official_rounds": official_rounds,
        "official_total_seconds": done["seconds"],
        "cosmosfl_rounds": ours,
        "alexnet_parameters": R.parameter_counts(same, ready),
    }


if __name__ == "__main__":
    sys.exit(main())
