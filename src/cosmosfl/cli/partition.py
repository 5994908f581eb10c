"""`cosmosfl partition`: the per-client label distribution of a config, sized for a terminal."""

from __future__ import annotations

import argparse
import shutil
import textwrap
from typing import Any


def add_parser(sub: Any, add_config_args: Any) -> None:
    part = sub.add_parser(
        "partition",
        help="show the per-client label distribution of a config",
        description="One row per client: sizes and, when they fit the terminal, one column per "
        "class; with more classes (Tiny ImageNet's 200), the classes each client holds and "
        "its largest ones. --csv and --plot give the full client x class matrix.",
    )
    add_config_args(part)
    part.add_argument("--plot", help="also save a PNG of the distribution to this path")
    part.add_argument("--csv", help="also write the full client x class count matrix as CSV")


def run(args: argparse.Namespace, cfg: Any) -> int:
    from cosmosfl.data import label_summary, label_table, plot_label_distribution, write_label_csv
    from cosmosfl.experiment.build import build_experiment

    exp = build_experiment(cfg)
    ds, names = exp.dataset, list(exp.dataset.classes)
    width = max(shutil.get_terminal_size((120, 24)).columns, 60)
    table = label_table(exp.partition, ds.y_train, ds.num_classes, names)
    if max(map(len, table.splitlines())) <= width:
        print(table)
    else:
        note = (
            f"{ds.num_classes} classes do not fit in {width} columns, one per class: a summary "
            "follows (the full matrix: --csv FILE or --plot FILE.png)"
        )
        print(textwrap.fill(note, width=width))
        print(label_summary(exp.partition, ds.y_train, ds.num_classes, names, width=width))
    if args.csv:
        path = write_label_csv(exp.partition, ds.y_train, ds.num_classes, args.csv, names)
        print(f"saved {path}")
    if args.plot:
        path = plot_label_distribution(exp.partition, ds.y_train, ds.num_classes, args.plot)
        print(f"saved {path}")
    return 0
