"""Options several `cosmosfl` commands share: the config (`--config` / `--preset`,
`--data-dir`, `key=value` overrides), tracking (`--tensorboard`, `--mlflow`), and what compare
and sweep share (seeds, output folder, --force, --quiet)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cosmosfl.cli import presets


def add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", help="YAML config file (default: built-in defaults)")
    presets.add_preset_arg(p)
    p.add_argument("--data-dir", help="folder of .npz datasets (sets data.data_dir)")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="override config values, e.g. rounds=3 algorithm.target_clusters=4",
    )


def config_args(args: argparse.Namespace) -> dict[str, Any]:
    """The config the options name, as `load_config`'s arguments: --config's file or
    --preset's, the key=value overrides with --tensorboard / --mlflow, and --data-dir."""
    return {
        "path": presets.config_source(args),
        "overrides": [*args.overrides, *tracking_overrides(args)],
        "data_dir": args.data_dir or None,
    }


def add_tracking_args(p: argparse.ArgumentParser) -> None:
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


def tracking_overrides(args: argparse.Namespace) -> list[str]:
    """--tensorboard / --mlflow as config overrides (JSON-quoted: any path is a YAML string)."""
    return [
        f"tracking.{name}={json.dumps(value)}"
        for name in ("tensorboard", "mlflow")
        if (value := getattr(args, name, None)) is not None
    ]


def add_batch_args(p: argparse.ArgumentParser, out: str, overrides_help: str) -> None:
    """What compare and sweep share: seeds, output folder, --force, --quiet, tracking and
    key=value overrides."""
    p.add_argument("--seeds", "-s", default="1", help="comma-separated seeds (default: 1)")
    p.add_argument("--out", "-o", default=out, help=f"output folder (default: {out})")
    p.add_argument("--force", action="store_true", help="rerun finished runs whose config changed")
    p.add_argument("--quiet", "-q", action="store_true", help="no per-round progress display")
    add_tracking_args(p)
    p.add_argument("overrides", nargs="*", metavar="key=value", help=overrides_help)
