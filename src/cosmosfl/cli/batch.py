"""`cosmosfl compare` and `cosmosfl sweep`: many runs on identical splits (resumable), then
their report. The experiment layer runs them and writes run directories; the report is the
reporting layer's, written here once the runs are done."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from cosmosfl.cli import presets
from cosmosfl.cli.options import add_batch_args, tracking_overrides


def add_parsers(sub: Any) -> None:
    cmp = sub.add_parser(
        "compare",
        help="run several algorithms x seeds on identical splits (resumable), then report",
        description="Run every algorithm with every seed on the same splits and initial client "
        "models, into OUT/<algorithm>/seed<k>/; finished runs with the same config are skipped, "
        "so re-running the command resumes. Ends with the report (see `cosmosfl report`).",
    )
    cmp.add_argument("--config", "-c", help="base YAML config (default: built-in defaults)")
    presets.add_preset_arg(cmp)
    cmp.add_argument("--data-dir", help="folder of .npz datasets (sets data.data_dir)")
    cmp.add_argument(
        "--algorithms",
        "-a",
        help="comma-separated names, e.g. cosmos,fedmd,fedct,comet,local,centralized "
        "(default: all of them)",
    )
    add_batch_args(
        cmp,
        "runs/compare",
        "override the base config (rounds=3, algorithm.local_epochs=2) or one algorithm's "
        "settings (fedmd.distill_epochs=2, comet.num_clusters=5)",
    )

    swp = sub.add_parser(
        "sweep",
        help="a grid of config values x algorithms x seeds (resumable), then ablation plots",
        description="Run every combination of the --grid values, each as a comparison of "
        "--algorithms x --seeds on the same splits and initial client models as `cosmosfl "
        "compare` gives for that setting, into OUT/<key1>=<v1>/<key2>=<v2>/<algorithm>/seed<k>/. "
        "Finished runs with the same config are skipped, so re-running the command resumes. "
        "Ends with ablation-<key>.md and .png per key (see `cosmosfl report`).",
    )
    swp.add_argument("--config", "-c", help="base YAML config (default: built-in defaults)")
    presets.add_preset_arg(swp)
    swp.add_argument("--data-dir", help="folder of .npz datasets (sets data.data_dir)")
    swp.add_argument(
        "--grid",
        "-g",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="a config key (data.num_clients=5,10) or one algorithm's setting (cosmos.lam=0,5) "
        'and its values, parsed like key=value overrides ("clients.models={mlp: 1},{cnn: 1}"); '
        "repeat for a grid of several keys",
    )
    swp.add_argument(
        "--algorithms", "-a", default="cosmos", help="comma-separated names (default: cosmos)"
    )
    add_batch_args(
        swp,
        "runs/sweep",
        "override the base config (rounds=3) or one algorithm's settings (fedmd.lam=1)",
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.compare import (
        known_names,
        parse_algorithms,
        parse_seeds,
        plan_compare,
        run_compare,
    )
    from cosmosfl.experiment.config import read_config_file
    from cosmosfl.reporting.report import write_report

    raw, overrides = _config_and_overrides(args, read_config_file)
    algorithms = parse_algorithms(args.algorithms or ",".join(known_names()))
    plan = plan_compare(raw, algorithms, parse_seeds(args.seeds), args.out, overrides)
    print("\n".join(plan.describe()))
    try:
        outcome = run_compare(plan, force=args.force, progress=not args.quiet)
        report = write_report(plan.out)
    except KeyboardInterrupt:
        return _interrupted()
    print(f"\n{len(outcome.ran)} runs done, {len(outcome.skipped)} already finished\n")
    print(report.text())
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.compare import parse_algorithms, parse_seeds
    from cosmosfl.experiment.config import read_config_file
    from cosmosfl.experiment.sweep import parse_grid, plan_sweep, run_sweep
    from cosmosfl.reporting.ablation import write_ablation_report

    raw, overrides = _config_and_overrides(args, read_config_file)
    axes = [parse_grid(text) for text in args.grid]
    algorithms = parse_algorithms(args.algorithms)
    plan = plan_sweep(raw, axes, algorithms, parse_seeds(args.seeds), args.out, overrides)
    print("\n".join(plan.describe()))
    try:
        outcome = run_sweep(plan, force=args.force, progress=not args.quiet)
        report = write_ablation_report(plan.out)
    except KeyboardInterrupt:
        return _interrupted()
    skipped = len(outcome.skipped) + len(outcome.shared)
    print(
        f"\n{len(outcome.ran)} runs trained, {skipped} of {len(plan.runs)} skipped "
        f"({len(outcome.skipped)} already finished, {len(outcome.shared)} the same run as "
        "another cell's)\n"
    )
    print(report.text())
    return 0


def _config_and_overrides(
    args: argparse.Namespace, read: Callable[[str], dict[str, Any]]
) -> tuple[dict[str, Any], list[str]]:
    """The base config (a file or a preset) and the overrides, tracking and data-dir
    included, that compare and sweep plan from."""
    source = presets.config_source(args)
    overrides = list(args.overrides) + tracking_overrides(args)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    return (read(source) if source else {}), overrides


def _interrupted() -> int:
    print(
        "cosmosfl: interrupted; run the same command again to resume (finished runs are skipped)",
        file=sys.stderr,
    )
    return 130
