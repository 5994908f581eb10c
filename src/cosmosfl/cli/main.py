"""`cosmosfl` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cosmosfl import __version__
from cosmosfl.cli import batch, presets, report
from cosmosfl.cli.options import (
    add_config_args,
    add_tracking_args,
    config_args,
    tracking_overrides,
)
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.preflight import PreflightError

EPILOG = """examples:
  cosmosfl run                                   # COSMOS on scikit-learn digits (default config)
  cosmosfl run --config configs/cifar10-cpu.yaml --data-dir ../shared/data --out runs/c10
  cosmosfl presets                               # the configs shipped with cosmosfl
  cosmosfl run --preset cifar10-cpu --data-dir ../shared/data   # one of them, no file needed
  cosmosfl run rounds=3 algorithm.lam=1.0 data.num_clients=20
  cosmosfl run --resume runs/c10                 # continue an interrupted run
  cosmosfl run faults.dropout=0.3                # inject seeded faults (docs/reliability.md)
  cosmosfl compare -c configs/default.yaml --algorithms cosmos,local,centralized --seeds 1,2 \
      --out runs/cmp rounds=3 local.local_epochs=1
  cosmosfl report runs/cmp                        # table.md/.tex, curves.png, communication.md
  cosmosfl sweep -c configs/default.yaml --grid data.num_clients=5,10 --grid cosmos.lam=0,5 \
      --algorithms cosmos,local --seeds 1,2 --out runs/sw rounds=2
  cosmosfl report runs/sw                         # ablation-<key>.md and .png per swept key
  cosmosfl report runs/T --key cosmos.temperature --cell 0=runs/T0 --cell 1=runs/cmp \
      --base 1 --versus local                     # the same from separate compare folders
  cosmosfl partition --config configs/cifar10-cpu.yaml --data-dir DIR --plot labels.png
  cosmosfl show-config --config configs/default.yaml
  cosmosfl run privacy.epsilon=4                 # every site within ε = 4 (docs/privacy.md)
  cosmosfl audit --canaries 20 --seeds 1,2,3 privacy.epsilon=4   # membership-inference audit
  cosmosfl flower simulate --out runs/flower rounds=2   # on Flower's simulation runtime
  cosmosfl flower local --out runs/flower-local rounds=2  # own SuperLink + SuperNodes
  cosmosfl bench clustering communication --data-dir ../shared/data   # benchmarks/README.md
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cosmosfl",
        description="Model-agnostic personalized federated learning (COSMOS and baselines).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cosmosfl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one experiment and write a run directory")
    add_config_args(run)
    run.add_argument("--out", "-o", help="run directory (default: runs/<algorithm>-seed<seed>)")
    run.add_argument(
        "--force",
        action="store_true",
        help="write into --out even when it holds a run, or files cosmosfl did not write",
    )
    run.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the interrupted run in DIR from its last complete round "
        "(its own config.yaml; no --config or overrides)",
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="stop the run at a rejected client reply or a degenerate client model (NaN or "
        "constant probabilities, below the majority class on its own training rows); without "
        "it they are recorded and flagged in summary.json",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    add_tracking_args(run)

    batch.add_parsers(sub)
    report.add_parser(sub)

    from cosmosfl.cli import partition

    partition.add_parser(sub, add_config_args)

    show = sub.add_parser("show-config", help="print the fully resolved config")
    add_config_args(show)

    presets.add_parser(sub)

    from cosmosfl.cli import audit

    audit.add_parser(sub, add_config_args)

    from cosmosfl.cli import flower

    flower.add_parser(sub, add_config_args)

    bench = sub.add_parser(
        "bench",
        help="run benchmarks (table on stdout, JSON in --out); see benchmarks/README.md",
        description="Benchmarks measured side by side in one process: overhead, fastpath, "
        "clustering, communication, round-time, parallel (or all), and gpu (CUDA; not in all).",
    )
    from cosmosfl.bench.runner import add_arguments

    add_arguments(bench)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from cosmosfl.engines.progress import format_kb
    from cosmosfl.experiment.errors import ConfigError
    from cosmosfl.experiment.runner import resume_experiment, run_experiment
    from cosmosfl.experiment.summary import exclusion_warning

    if args.resume:
        given = [
            f for f, v in (("--config", args.config), ("--preset", args.preset),
                           ("--data-dir", args.data_dir),
                           ("--out", args.out), ("--force", args.force),
                           ("key=value overrides", args.overrides)) if v
        ]  # fmt: skip
        if given:
            raise ConfigError(
                f"--resume continues a run with its own config; remove {', '.join(given)}"
            )
        out = Path(args.resume)
    else:
        cfg = load_config(**config_args(args))
        default = Path("runs") / f"{cfg.algorithm['name']}-seed{cfg.seed}"
        out = Path(args.out) if args.out else default
    try:
        if args.resume:
            result = resume_experiment(
                out, progress=not args.quiet, tracker=_resume_tracker(args), strict=args.strict
            )
        else:
            result = run_experiment(
                cfg, out, progress=not args.quiet, force=args.force, strict=args.strict
            )
    except KeyboardInterrupt:
        print(
            f"cosmosfl: interrupted; every finished round is saved in {out}; "
            f"continue with: cosmosfl run --resume {out}",
            file=sys.stderr,
        )
        return 130
    s = result.summary  # type: ignore[attr-defined]
    fr = s["final_round"]
    print(f"\nfinal round {s['rounds']} ({s['algorithm']}, seed {s['seed']}), mean over clients:")
    for model, acc in fr["mean_accuracy"].items():
        tag = "  <- reported" if model == s["reported_model"] else ""
        line = f"  {model:<14} top1 {acc:.4f} ± {fr['sem_over_clients'][model]:.4f}"
        if model in fr.get("mean_top5", {}):
            top5, sem5 = fr["mean_top5"][model], fr["sem_over_clients_top5"][model]
            line += f"  top5 {top5:.4f} ± {sem5:.4f}"
        print(f"{line} (± SEM over clients){tag}")
    if "clusters" in s:
        line = f"  clusters: K={s['K']}"
        if s.get("threshold") is not None:
            line += f", B0={s['threshold']:.4f}"
        if "adjusted_rand_index" in s:
            line += f", ARI vs true groups {s['adjusted_rand_index']:.3f}"
        print(line)
    b = s["bytes_per_client_per_round"]
    print(
        f"  communication per client per round: up {format_kb(b['up'])}, "
        f"down {format_kb(b['down'])}"
    )
    print(f"  {s['seconds_per_round']:.1f} s per round; run directory: {out}")
    warning = exclusion_warning(s)
    if warning:
        print(f"  {warning}")
    for cid, bad in s.get("degenerate_clients", {}).items():
        print(f"  warning: client {cid}'s model {bad['model']!r} is degenerate: {bad['reason']}")
    return 0


def _resume_tracker(args: argparse.Namespace):
    """With --tensorboard / --mlflow on --resume: the run's own tracking, those set over it."""
    from cosmosfl.experiment.rundir import CONFIG
    from cosmosfl.experiment.tracking import make_tracker

    given = tracking_overrides(args)
    if not given or not (Path(args.resume) / CONFIG).is_file():
        return None  # the run's own tracking section (resume_experiment reports a bad DIR)
    cfg = load_config(Path(args.resume) / CONFIG, given)
    return make_tracker(cfg.tracking, Path(args.resume).name)


def cmd_partition(args: argparse.Namespace) -> int:
    from cosmosfl.cli import partition

    return partition.run(args, load_config(**config_args(args)))


def cmd_flower(args: argparse.Namespace) -> int:
    from cosmosfl.cli import flower

    return flower.run(args, load_config(**config_args(args)))


def cmd_audit(args: argparse.Namespace) -> int:
    from cosmosfl.cli import audit

    return audit.run(args, load_config(**config_args(args)))


def cmd_show_config(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.config import dump_config
    from cosmosfl.experiment.runner import describe_parallelism

    cfg = load_config(**config_args(args))
    print(dump_config(cfg), end="")
    print(f"# on this machine: {describe_parallelism(cfg)}")  # what workers: auto resolves to
    for notice in cfg.notices:
        print(f"# note: {notice}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from cosmosfl.bench.runner import run_from_args

    return run_from_args(args)


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Like parse_args, but `key=value` overrides may also come after options
    (`cosmosfl run seed=2 --out runs/x rounds=3`), which argparse alone rejects."""
    args, extra = parser.parse_known_args(argv)
    stray = [a for a in extra if a.startswith("-") or "=" not in a]
    if stray or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    return args


@contextmanager
def deprecations_shown() -> Iterator[None]:
    """Show cosmosfl's warnings as one `cosmosfl: warning:` line each, without Python's source
    line: DeprecationWarnings (a deprecated config key the user wrote; Python hides them
    outside __main__ by default) and UserWarnings (e.g. a learner that ignores sample weights,
    a refit kept out as diverged)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("default", category=DeprecationWarning, module=r"cosmosfl(\.|$)")
        show = warnings.showwarning

        def one_line(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, DeprecationWarning | UserWarning) and "cosmosfl" in filename:
                print(f"cosmosfl: warning: {message}", file=sys.stderr)
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = one_line
        yield


def main(argv: list[str] | None = None) -> int:
    from cosmosfl.data import DatasetFormatError, DatasetNotFoundError, PartitionError
    from cosmosfl.engines.simulation import ParticipationError
    from cosmosfl.experiment.errors import ConfigError
    from cosmosfl.learners.torch import DeviceUnavailableError
    from cosmosfl.models import UnknownModelError

    args = parse_args(build_parser(), argv)
    handlers = {
        "run": cmd_run,
        "compare": batch.cmd_compare,
        "sweep": batch.cmd_sweep,
        "report": report.cmd_report,
        "partition": cmd_partition,
        "show-config": cmd_show_config,
        "presets": presets.run,
        "flower": cmd_flower,
        "audit": cmd_audit,
        "bench": cmd_bench,
    }
    try:
        with deprecations_shown():
            return handlers[args.command](args)
    except (
        ConfigError,
        DatasetNotFoundError,
        DatasetFormatError,
        PartitionError,
        UnknownModelError,
        DeviceUnavailableError,
        PreflightError,
    ) as err:
        print(f"cosmosfl: error: {err}", file=sys.stderr)
        return 2
    except ParticipationError as err:  # the federation, not the user: a clear line, exit 1
        print(f"cosmosfl: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cosmosfl: interrupted; finished rounds are in metrics.jsonl", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["build_parser", "main"]
