"""`cosmosfl presets` and the `--preset NAME` option: the configs shipped inside the package."""

from __future__ import annotations

import argparse
import shutil
import textwrap
from typing import Any

PRESET_HELP = "a config shipped with cosmosfl, by name (`cosmosfl presets` lists them)"


def add_preset_arg(p: argparse.ArgumentParser) -> None:
    """--preset NAME, the alternative to --config FILE."""
    p.add_argument("--preset", "-p", metavar="NAME", help=PRESET_HELP)


def config_source(args: argparse.Namespace) -> str | None:
    """The config file a command reads: --config's path, --preset's shipped file, or None
    (the built-in defaults). Both at once is an error."""
    preset = getattr(args, "preset", None)
    if preset is None:
        return args.config
    from cosmosfl.experiment.errors import ConfigError
    from cosmosfl.presets import preset_path

    if args.config:
        raise ConfigError("give either --config FILE or --preset NAME, not both")
    return str(preset_path(preset))


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "presets",
        help="list the configs shipped with cosmosfl (run one with --preset NAME)",
        description="Without NAME: every preset with a line on it. With NAME: that preset's "
        "YAML, with its comments (what it reproduces and its reductions from the paper). Run "
        "one with `cosmosfl run --preset NAME`; compare, sweep, partition, show-config and "
        "flower take --preset too.",
    )
    p.add_argument("name", nargs="?", help="print this preset's YAML file")


def run(args: argparse.Namespace) -> int:
    from cosmosfl.presets import list_presets, preset_path

    if args.name:
        print(preset_path(args.name).read_text(encoding="utf-8"), end="")
        return 0
    presets = list_presets()
    width = max(shutil.get_terminal_size((100, 24)).columns, 60)
    indent = max(len(p.name) for p in presets) + 2
    for p in presets:
        lines = textwrap.wrap(p.summary, width=width - indent) or [""]
        print(f"{p.name:<{indent}}{lines[0]}")
        for line in lines[1:]:
            print(" " * indent + line)
    print("\nrun one: cosmosfl run --preset NAME   its file: cosmosfl presets NAME")
    return 0
