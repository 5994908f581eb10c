"""Presets: the ready experiment configs, shipped inside the package.

`cosmosfl run --preset cifar10-cpu` needs no checkout: the YAML files beside this module are
byte-identical copies of the repository's `configs/` (a test keeps them so; `make presets`
copies them), and a preset's name is its file name without `.yaml`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Preset", "list_presets", "preset_path"]

_DIR = Path(__file__).resolve().parent
# The first sentence of a preset's leading comment: up to a full stop followed by a space or
# the end ("e.g." and "i.e." do not end it, nor does "1.0e-3").
_SENTENCE = re.compile(r"^(.+?(?<!e\.g)(?<!i\.e)[.!?])(?:\s|$)", re.S)


@dataclass(frozen=True)
class Preset:
    """A shipped config: its `name`, the `path` of its YAML file, and a one-line `summary`
    (the first sentence of the file's leading comment)."""

    name: str
    path: Path
    summary: str


def _summary(text: str) -> str:
    comment: list[str] = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        body = line.lstrip("#")
        if not body.strip() or body.startswith("   "):
            break  # the first paragraph only, without its indented example commands
        comment.append(body.strip())
    joined = " ".join(comment)
    match = _SENTENCE.match(joined)
    return match.group(1) if match else joined


def list_presets() -> list[Preset]:
    """Every shipped preset, sorted by name."""
    return [
        Preset(path.stem, path, _summary(path.read_text(encoding="utf-8")))
        for path in sorted(_DIR.glob("*.yaml"), key=lambda p: p.stem)
    ]


def preset_path(name: str) -> Path:
    """The YAML file of preset `name`; an unknown name is a ConfigError listing every preset."""
    path = _DIR / f"{name}.yaml"
    if "/" in name or "\\" in name or not path.is_file():
        from cosmosfl.experiment.errors import ConfigError

        names = ", ".join(p.name for p in list_presets())
        raise ConfigError(
            f"unknown preset {name!r}; available presets: {names} (`cosmosfl presets` lists them "
            "with a line on each; --config takes a YAML file of your own)"
        )
    return path
