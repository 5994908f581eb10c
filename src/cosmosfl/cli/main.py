"""`cosmosfl` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cosmosfl import __version__
from cosmosfl.cli import presets
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
  cosmosfl flower simulate --out runs/flower rounds=2   # on Flower's simulation runtime
  cosmosfl flower local --out runs/flower-local rounds=2  # own SuperLink + SuperNodes
  cosmosfl bench clustering communication --data-dir ../shared/data   # benchmarks/README.md
"""


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", help="YAML config file (default: built-in defaults)")
    presets.add_preset_arg(p)
    p.add_argument("--data-dir", help="folder of .npz datasets (sets data.data_dir)")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="override config values, e.g. rounds=3 algorithm.target_clusters=4",
    )


def _add_tracking_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="log every round to TensorBoard under DIR (sets tracking.tensorboard; "
        "needs pip install 'cosmosfl[tensorboard]')",
    )
    p.add_argument(
        "--mlflow",
        metavar="URI",
        help="log every round to MLflow: a server (http://host:5000), a local store "
        "(runs/mlflow.db) or 'default' (sets tracking.mlflow; needs pip install "
        "'cosmosfl[mlflow]')",
    )


def _tracking_overrides(args: argparse.Namespace) -> list[str]:
    """--tensorboard / --mlflow as config overrides (JSON-quoted: any path is a YAML string)."""
    return [
        f"tracking.{name}={json.dumps(value)}"
        for name in ("tensorboard", "mlflow")
        if (value := getattr(args, name, None)) is not None
    ]


def _add_batch_args(p: argparse.ArgumentParser, out: str, overrides_help: str) -> None:
    """What compare and sweep share: seeds, output folder, --force, --quiet, tracking and
    key=value overrides."""
    p.add_argument("--seeds", "-s", default="1", help="comma-separated seeds (default: 1)")
    p.add_argument("--out", "-o", default=out, help=f"output folder (default: {out})")
    p.add_argument("--force", action="store_true", help="rerun finished runs whose config changed")
    p.add_argument("--quiet", "-q", action="store_true", help="no per-round progress display")
    _add_tracking_args(p)
    p.add_argument("overrides", nargs="*", metavar="key=value", help=overrides_help)


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
    _add_config_args(run)
    run.add_argument("--out", "-o", help="run directory (default: runs/<algorithm>-seed<seed>)")
    run.add_argument("--force", action="store_true", help="overwrite a finished run directory")
    run.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the interrupted run in DIR from its last complete round "
        "(its own config.yaml; no --config or overrides)",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    _add_tracking_args(run)

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
    _add_batch_args(
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
    _add_batch_args(
        swp,
        "runs/sweep",
        "override the base config (rounds=3) or one algorithm's settings (fedmd.lam=1)",
    )

    report = sub.add_parser(
        "report",
        help="tables and plots of a compare or sweep folder",
        description="On a compare folder: write table.md, table.tex, curves.png, "
        "communication.md and clusters.png into DIR from the finished runs under "
        "DIR/<algorithm>/seed<k>/, and with a `local` run client-gains.md and "
        "client-gains.png (each client's gain over `local`, paired: who gains, who loses, "
        "per client kind where they mix). On a sweep folder (with sweep.yaml): write "
        "ablation-<key>.md and ablation-<key>.png for every swept key, and client-gains.md / "
        ".png per cell with `local`. With --key and --cell: the same ablation report from "
        "separately run compare folders, into DIR (docs/sweeps.md).",
    )
    report.add_argument(
        "dir",
        help="the folder `cosmosfl compare` or `cosmosfl sweep` wrote; with --cell, the folder "
        "to write the ablation report into",
    )
    report.add_argument(
        "--key",
        action="append",
        default=[],
        help="with --cell: the setting the cells differ in (e.g. cosmos.temperature); repeat for "
        'a grid of several keys, each cell\'s value then a list (--cell "[10, 0]=DIR")',
    )
    report.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="VALUE=DIR",
        help="one value of --key and a compare folder run with it (repeat; the folders of one "
        "value, then --shared, fill its cell in order, each adding the algorithms the ones before "
        "it lack)",
    )
    report.add_argument(
        "--shared",
        action="append",
        default=[],
        metavar="DIR",
        help="with --cell: a compare folder whose runs do not depend on --key (e.g. local, "
        "COMET); fills the algorithms a cell has no run of",
    )
    report.add_argument(
        "--base",
        metavar="[KEY=]VALUE",
        help="ablation reports: add a column with each row's paired difference to the same "
        "series at this value",
    )
    report.add_argument(
        "--versus",
        metavar="ALG[,ALG...]",
        help="ablation reports: add a column per algorithm with each row's paired difference "
        "to that algorithm's reported model in the same cell",
    )

    from cosmosfl.cli import partition

    partition.add_parser(sub, _add_config_args)

    show = sub.add_parser("show-config", help="print the fully resolved config")
    _add_config_args(show)

    presets.add_parser(sub)

    from cosmosfl.cli import flower

    flower.add_parser(sub, _add_config_args)

    bench = sub.add_parser(
        "bench",
        help="run benchmarks (table on stdout, JSON in --out); see benchmarks/README.md",
        description="Benchmarks measured side by side in one process: overhead, fastpath, "
        "clustering, communication, round-time, parallel (or all), and gpu (CUDA; not in all).",
    )
    from cosmosfl.bench.runner import add_arguments

    add_arguments(bench)
    return parser


def _load(args: argparse.Namespace):
    from cosmosfl.experiment.config import load_config

    overrides = list(args.overrides) + _tracking_overrides(args)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    return load_config(presets.config_source(args), overrides)


def cmd_run(args: argparse.Namespace) -> int:
    from cosmosfl.engines.progress import format_kb
    from cosmosfl.experiment.config import ConfigError
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
        cfg = _load(args)
        default = Path("runs") / f"{cfg.algorithm['name']}-seed{cfg.seed}"
        out = Path(args.out) if args.out else default
    try:
        if args.resume:
            result = resume_experiment(out, progress=not args.quiet, tracker=_resume_tracker(args))
        else:
            result = run_experiment(cfg, out, progress=not args.quiet, force=args.force)
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
    return 0


def _resume_tracker(args: argparse.Namespace):
    """With --tensorboard / --mlflow on --resume: the run's own tracking, those set over it."""
    from cosmosfl.experiment.config import load_config
    from cosmosfl.experiment.rundir import CONFIG
    from cosmosfl.experiment.tracking import make_tracker

    given = _tracking_overrides(args)
    if not given or not (Path(args.resume) / CONFIG).is_file():
        return None  # the run's own tracking section (resume_experiment reports a bad DIR)
    cfg = load_config(Path(args.resume) / CONFIG, given)
    return make_tracker(cfg.tracking, Path(args.resume).name)


def cmd_compare(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.compare import (
        known_names,
        parse_algorithms,
        parse_seeds,
        plan_compare,
        run_compare,
    )
    from cosmosfl.experiment.config import read_config_file

    source = presets.config_source(args)
    raw = read_config_file(source) if source else {}
    overrides = list(args.overrides) + _tracking_overrides(args)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    algorithms = parse_algorithms(args.algorithms or ",".join(known_names()))
    plan = plan_compare(raw, algorithms, parse_seeds(args.seeds), args.out, overrides)
    print("\n".join(plan.describe()))
    try:
        outcome = run_compare(plan, force=args.force, progress=not args.quiet)
    except KeyboardInterrupt:
        print(
            "cosmosfl: interrupted; run the same command again to resume "
            "(finished runs are skipped)",
            file=sys.stderr,
        )
        return 130
    print(f"\n{len(outcome.ran)} runs done, {len(outcome.skipped)} already finished\n")
    print(outcome.report.text())
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.compare import parse_algorithms, parse_seeds
    from cosmosfl.experiment.config import read_config_file
    from cosmosfl.experiment.sweep import parse_grid, plan_sweep, run_sweep

    source = presets.config_source(args)
    raw = read_config_file(source) if source else {}
    overrides = list(args.overrides) + _tracking_overrides(args)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    axes = [parse_grid(text) for text in args.grid]
    algorithms = parse_algorithms(args.algorithms)
    plan = plan_sweep(raw, axes, algorithms, parse_seeds(args.seeds), args.out, overrides)
    print("\n".join(plan.describe()))
    try:
        outcome = run_sweep(plan, force=args.force, progress=not args.quiet)
    except KeyboardInterrupt:
        print(
            "cosmosfl: interrupted; run the same command again to resume "
            "(finished runs are skipped)",
            file=sys.stderr,
        )
        return 130
    skipped = len(outcome.skipped) + len(outcome.shared)
    print(
        f"\n{len(outcome.ran)} runs trained, {skipped} of {len(plan.runs)} skipped "
        f"({len(outcome.skipped)} already finished, {len(outcome.shared)} the same run as "
        "another cell's)\n"
    )
    print(outcome.report.text())
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.assemble import parse_cell, read_assembly, write_assembled_report
    from cosmosfl.experiment.config import ConfigError
    from cosmosfl.experiment.contrasts import parse_base
    from cosmosfl.experiment.report import write_report
    from cosmosfl.experiment.sweep import read_sweep

    versus = [a.strip() for a in (args.versus or "").split(",") if a.strip()]
    # On a redraw, --versus given (even empty: --versus '') replaces the saved one.
    versus_given = args.versus is not None
    if args.cell or args.key:
        if not (args.cell and args.key):
            raise ConfigError("report: --key and --cell go together (--key KEY --cell VALUE=DIR)")
        cells = [parse_cell(text) for text in args.cell]
        base = parse_base(args.base, args.key) if args.base else {}
        report = write_assembled_report(args.dir, args.key, cells, args.shared, base, versus)
        print(report.text())
        return 0
    if args.shared:
        raise ConfigError("report: --shared goes with --key and --cell")
    saved = read_assembly(args.dir)
    if saved is not None:
        base = parse_base(args.base, saved["keys"]) if args.base else saved["base"]
        keys, cells, shared = saved["keys"], saved["cells"], saved["shared"]
        versus = versus if versus_given else saved["versus"]
        report = write_assembled_report(args.dir, keys, cells, shared, base, versus)
        print(report.text())
        return 0
    doc = read_sweep(args.dir)
    if doc is not None:
        from cosmosfl.experiment.ablation import write_ablation_report

        keys = [a["key"] for a in doc["grid"]]
        base = parse_base(args.base, keys) if args.base else {}
        print(write_ablation_report(args.dir, base, versus).text())
        return 0
    if args.base or versus:
        raise ConfigError(
            "report: --base and --versus apply to ablation reports (a sweep folder, or --key "
            "with --cell); a compare folder's table.md compares algorithms already"
        )
    print(write_report(args.dir).text())
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    from cosmosfl.cli import partition

    return partition.run(args, _load(args))


def cmd_flower(args: argparse.Namespace) -> int:
    from cosmosfl.cli import flower

    return flower.run(args, _load(args))


def cmd_show_config(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.config import dump_config
    from cosmosfl.experiment.runner import describe_parallelism

    cfg = _load(args)
    print(dump_config(cfg), end="")
    print(f"# on this machine: {describe_parallelism(cfg)}")  # what workers: auto resolves to
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
    from cosmosfl.experiment.config import ConfigError
    from cosmosfl.learners.torch import DeviceUnavailableError
    from cosmosfl.models import UnknownModelError

    args = parse_args(build_parser(), argv)
    handlers = {
        "run": cmd_run,
        "compare": cmd_compare,
        "sweep": cmd_sweep,
        "report": cmd_report,
        "partition": cmd_partition,
        "show-config": cmd_show_config,
        "presets": presets.run,
        "flower": cmd_flower,
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
