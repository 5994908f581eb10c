"""YAML as people write it: `1e-3` is a number.

PyYAML follows YAML 1.1, where a float needs a dot (`1.0e-3`), so `server_lr: 1e-3` would be
the text '1e-3' and refused as "must be of type float". Every config file, `key=value`
override, sweep grid and site file is read with `load_yaml`, which also reads YAML 1.2's
exponent-only floats (`1e-3`, `5E4`, `-2e+1`) as floats.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["load_yaml"]


class _Loader(yaml.SafeLoader):
    """SafeLoader plus YAML 1.2 floats without a dot."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load`, with `1e-3` read as the float 0.001."""
    return yaml.load(text, Loader=_Loader)
