"""The benchmark registry and its command line (shared by `cosmosfl bench` and
`python -m benchmarks`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI builds its parser from this module: keep torch out of it
    from cosmosfl.bench.common import Report

# name -> (module, description); modules are imported on use.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "overhead": (
        "cosmosfl.bench.training:overhead",
        "TorchLearner fit/distill/predict_proba vs a bare PyTorch loop",
    ),
    "fastpath": (
        "cosmosfl.bench.training:fastpath",
        "bf16 autocast, channels-last, inference batch size, batched models (vmap)",
    ),
    "clustering": (
        "cosmosfl.bench.clustering:run",
        "distances + greedy clustering for N = 100, 1,000, 10,000 clients",
    ),
    "communication": (
        "cosmosfl.bench.communication:run",
        "bytes per client per round by codec vs FedAvg, and each codec's accuracy cost",
    ),
    "round-time": (
        "cosmosfl.bench.rounds:round_time",
        "seconds per COSMOS round by phase on the CIFAR-10 CPU config",
    ),
    "time-to-accuracy": (
        "cosmosfl.bench.accuracy:time_to_accuracy",
        "wall time to a target accuracy: paper model choices vs recommended CPU choices",
    ),
    "model-cost": (
        "cosmosfl.bench.accuracy:model_cost",
        "training images/s of the paper's models vs the recommended CPU models",
    ),
    "parallel": (
        "cosmosfl.bench.rounds:parallel",
        "serial vs worker-process clients: same records, wall time by phase",
    ),
    "gpu": (
        "cosmosfl.bench.gpu:run",
        "needs CUDA (--quick: toy size, any device): paper models' images/s by precision and "
        "layout, stacked vs loop, one paper-config round (benchmarks/gpu.sh)",
    ),
}


def run_benchmark(name: str, **options: Any) -> Report:
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; allowed: {', '.join(BENCHMARKS)}")
    module, _, func = BENCHMARKS[name][0].partition(":")
    return getattr(importlib.import_module(module), func)(**options)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="+", metavar="NAME", help=f"one of: {', '.join(BENCHMARKS)}, all")
    p.add_argument("--out", default="benchmarks/results", help="folder for NAME.json")
    p.add_argument("--data-dir", help="folder with cifar10_jpeg.npz (CIFAR benchmarks)")
    p.add_argument("--config", help="CIFAR-10 config (default: configs/cifar10-cpu.yaml)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    p.add_argument(
        "--budget",
        type=float,
        help="wall seconds: time-to-accuracy per choice of models (default 1800); gpu for the "
        "whole run (default 450, toy 600)",
    )


def run_from_args(args: argparse.Namespace) -> int:
    # `all` leaves out gpu: it needs CUDA and is its own prepared run (benchmarks/gpu.sh).
    names = [n for n in BENCHMARKS if n != "gpu"] if args.names == ["all"] else args.names
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(
            f"unknown benchmark(s) {', '.join(unknown)}; allowed: {', '.join(BENCHMARKS)}, all",
            file=sys.stderr,
        )
        return 2
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    for name in names:
        options: dict[str, Any] = {"quick": args.quick}
        if name in (
            "communication",
            "round-time",
            "parallel",
            "overhead",
            "fastpath",
            "time-to-accuracy",
            "gpu",
        ):
            options.update(data_dir=args.data_dir)
        if name in ("communication", "round-time", "parallel", "time-to-accuracy", "gpu"):
            options.update(config=args.config)
        if name in ("time-to-accuracy", "gpu") and args.budget is not None:
            if args.budget <= 0:
                print(f"--budget must be > 0 seconds, got {args.budget:g}", file=sys.stderr)
                return 2
            options.update(budget_s=args.budget)
        report = run_benchmark(name, **options)
        print(report.text() + "\n")
        path = report.write(Path(args.out))
        print(f"wrote {path}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    from cosmosfl.experiment.errors import ConfigError

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run cosmosfl benchmarks: a table on stdout, JSON in --out.",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
