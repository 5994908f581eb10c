"""The public set U as a file every party holds: read, identified by its SHA-256, and the
standardisation with U's own statistics that every party applies to its data.

Sites that bring their own files (experiment/sites.py) share nothing else: a party whose U
differs by a byte from the run's is refused, because pseudo-labels on two different U's cannot
be compared row by row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosmosfl.data.errors import DatasetFormatError
from cosmosfl.data.prepare import standardiser
from cosmosfl.data.schema import FeatureSchema
from cosmosfl.data.tabular import TABLE_SUFFIXES, read_public_table

__all__ = ["PublicSet", "PublicSetError", "file_sha256", "load_public"]


class PublicSetError(DatasetFormatError):
    """This party's U is not the run's (another file, or none): it cannot join."""


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (U's identity: every party must hold the same file)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class PublicSet:
    """U as every party prepares it: raw samples, the feature layout a table fixes, and the
    standardisation with U's own statistics that every party applies to its data."""

    raw: np.ndarray
    sha256: str
    schema: FeatureSchema | None  # tables only
    prepare: Callable[[np.ndarray], np.ndarray]

    @property
    def kind(self) -> str:
        return "images" if self.raw.ndim == 4 else "vectors"

    @property
    def x(self) -> np.ndarray:
        return self.prepare(self.raw)


def load_public(
    path: str | Path,
    *,
    sha256: str | None,
    label_column: str | None = None,
    missing: str = "refuse",
    who: str = "this party",
    sep: str | None = None,
    encoding: str | None = None,
) -> PublicSet:
    """Read U and check it is the run's: its SHA-256 must be `sha256` (None: not checked)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PublicSetError(
            f"{who}: the public set U {str(path)!r} does not exist; every party needs the "
            "same U file (ask the federation's coordinator for it)"
        )
    digest = file_sha256(path)
    if sha256 is not None and digest != sha256.lower():
        raise PublicSetError(
            f"{who}: the public set U at {path} has SHA-256 {digest[:16]}..., the run expects "
            f"{sha256[:16]}...: every party must hold the same U file; get the run's copy "
            "from the coordinator (do not edit or re-export it)"
        )
    schema = None
    if path.name.lower().endswith(TABLE_SUFFIXES):
        raw, schema = read_public_table(
            path, label_column=label_column, missing=missing, sep=sep, encoding=encoding
        )
    elif path.suffix == ".npz":
        raw = _public_npz(path)
    else:
        raise DatasetFormatError(
            f"{who}: the public set U must be a table ({', '.join(TABLE_SUFFIXES)}) or an "
            f".npz file with an array `x`; got {path.name}"
        )
    return PublicSet(raw, digest, schema, standardiser(raw))


def _public_npz(path: Path) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as data:
            key = next((k for k in ("x", "x_public", "x_train") if k in data.files), None)
            if key is None:
                raise DatasetFormatError(
                    f"{path}: the public set needs an array `x` (found {sorted(data.files)})"
                )
            x = np.asarray(data[key])
    except (ValueError, OSError, EOFError) as err:
        raise DatasetFormatError(f"{path}: not a readable .npz file ({err})") from None
    if x.ndim == 2 and np.issubdtype(x.dtype, np.number):
        return x.astype(np.float32)
    if x.ndim == 4 and x.dtype == np.uint8:
        return x
    raise DatasetFormatError(
        f"{path}: `x` must be feature vectors (N, D) or uint8 images (N, H, W, C), got "
        f"{x.dtype} {x.shape}"
    )
