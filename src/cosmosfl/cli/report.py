"""`cosmosfl report`: the report of a compare, sweep or assembly folder (the reporting layer
tells which it is), or an ablation assembled from separately run compare folders (--key,
--cell, --shared)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
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


def cmd_report(args: argparse.Namespace) -> int:
    from cosmosfl.experiment.errors import ConfigError
    from cosmosfl.reporting.assemble import parse_cell, write_assembled_report
    from cosmosfl.reporting.contrasts import parse_base
    from cosmosfl.reporting.folders import write_folder_report

    versus = [a.strip() for a in (args.versus or "").split(",") if a.strip()]
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
    # On a redraw of an assembly, --versus given (even empty: --versus '') replaces the saved one.
    given = versus if args.versus is not None else None
    print(write_folder_report(args.dir, args.base, given).text())
    return 0
