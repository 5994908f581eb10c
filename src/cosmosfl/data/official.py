"""The paper's datasets in the formats their publishers ship them, read into plain arrays.

- `read_cifar100_python`: the official `cifar-100-python` pickles (folder or `.tar.gz`), loaded
  with a restricted unpickler that can build numpy arrays and nothing else.
- `read_emnist_idx`: the official EMNIST gzip IDX files, images returned upright.

Each returns a dict with `x_train, y_train, x_test, y_test` (uint8 (N, H, W, C), int64 labels)
and `classes`.
"""

from __future__ import annotations

import gzip
import importlib
import io
import pickle
import struct
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError

EMNIST_SPLITS = ("balanced", "byclass", "bymerge", "digits", "letters", "mnist")
_CIFAR_DIR, _CIFAR_TAR = "cifar-100-python", "cifar-100-python.tar.gz"

__all__ = [
    "EMNIST_SPLITS",
    "find_cifar100",
    "find_emnist",
    "read_cifar100_python",
    "read_emnist_idx",
]


# -- CIFAR-100, the official python pickles -------------------------------------------------------
def find_cifar100(data_dir: str | Path) -> Path | None:
    """`data_dir/cifar-100-python/` if it holds train, test and meta, else the tarball, or None."""
    base = Path(data_dir).expanduser()
    folder = base / _CIFAR_DIR
    if all((folder / name).is_file() for name in ("train", "test", "meta")):
        return folder
    tar = base / _CIFAR_TAR
    return tar if tar.is_file() else None


def read_cifar100_python(folder: str | Path) -> dict[str, Any]:
    """Read the official CIFAR-100 python version: uint8 (N, 32, 32, 3) images, fine labels.

    `folder` is the extracted `cifar-100-python/` folder (files train, test, meta), a folder that
    holds it or `cifar-100-python.tar.gz`, or that tarball itself (read in memory, not extracted).
    The pickles are loaded by an unpickler that can only rebuild numpy arrays: a pickle can run
    arbitrary code, and these files usually come from the internet.
    """
    path = Path(folder).expanduser()
    if path.is_dir() and not (path / "train").is_file():
        path = find_cifar100(path) or path
    names = ("train", "test", "meta")
    if path.is_file():
        blobs = _cifar_from_tar(path, names)
    elif path.is_dir():
        missing = [n for n in names if not (path / n).is_file()]
        if missing:
            raise DatasetNotFoundError(
                f"{path}: CIFAR-100 files {missing} not found; expected the extracted "
                f"{_CIFAR_DIR}/ folder (train, test, meta) or {_CIFAR_TAR}"
            )
        blobs = {n: (path / n).read_bytes() for n in names}
    else:
        raise DatasetNotFoundError(f"CIFAR-100 folder {str(path)!r} does not exist")
    meta = _fields(_unpickle(blobs["meta"], f"{path}: meta"), ["fine_label_names"], f"{path}: meta")
    classes = tuple(
        n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n)
        for n in meta["fine_label_names"]
    )
    out: dict[str, Any] = {"classes": classes}
    for split in ("train", "test"):
        where = f"{path}: {split}"
        part = _fields(_unpickle(blobs[split], where), ["data", "fine_labels"], where)
        data, y = part["data"], np.asarray(part["fine_labels"])
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.shape[1:] != (3072,):
            raise DatasetFormatError(
                f"{where}: 'data' must be a uint8 array of shape (N, 3072), got "
                f"{getattr(data, 'shape', type(data).__name__)} {getattr(data, 'dtype', '')}"
            )
        if y.ndim != 1 or len(y) != len(data) or not np.issubdtype(y.dtype, np.integer):
            raise DatasetFormatError(
                f"{where}: 'fine_labels' must be {len(data)} integers, one per image, got shape "
                f"{y.shape} dtype {y.dtype}"
            )
        if len(y) and (y.min() < 0 or y.max() >= len(classes)):
            raise DatasetFormatError(
                f"{where}: fine labels span [{y.min()}, {y.max()}] but meta names "
                f"{len(classes)} classes"
            )
        # Rows are channel-major: 1024 red, 1024 green, 1024 blue values, each 32 rows of 32.
        images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        out[f"x_{split}"] = np.ascontiguousarray(images)
        out[f"y_{split}"] = y.astype(np.int64)
    return out


def _cifar_from_tar(path: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    blobs: dict[str, bytes] = {}
    try:
        # Stream mode: one pass through the gzip stream, members read in memory, nothing written.
        with tarfile.open(path, "r|*") as tar:
            for member in tar:
                name = member.name.rsplit("/", 1)[-1]
                if member.isfile() and name in names and name not in blobs:
                    blobs[name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise DatasetFormatError(f"{path}: not a readable .tar.gz archive ({exc})") from exc
    missing = [n for n in names if n not in blobs]
    if missing:
        raise DatasetFormatError(
            f"{path}: the archive lacks {missing}; expected {_CIFAR_DIR}/train, test and meta"
        )
    return blobs


def _numpy_multiarray() -> Any:
    # numpy >= 1.26 has numpy._core; importing numpy.core on numpy 2 warns (DeprecationWarning).
    try:
        return importlib.import_module("numpy._core.multiarray")
    except ImportError:  # numpy < 1.26
        return importlib.import_module("numpy.core.multiarray")


def _latin1_encode(text: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    # Python 3 writes bytes as _codecs.encode(text, "latin1") under pickle protocol 2.
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"_codecs.encode with encoding {encoding!r} is not allowed")
    return text.encode("latin1", errors)


def _allowed_globals() -> dict[tuple[str, str], Callable[..., Any]]:
    ma = _numpy_multiarray()
    allowed: dict[tuple[str, str], Callable[..., Any]] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1_encode,
    }
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):  # Python 2 / numpy 2 names
        allowed[(module, "_reconstruct")] = ma._reconstruct
        allowed[(module, "scalar")] = ma.scalar
    return allowed


class _Refused(pickle.UnpicklingError):
    pass


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Resolves only the globals that pickled numpy arrays need; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _allowed_globals()[(module, name)]
        except KeyError:
            raise _Refused(f"{module}.{name}") from None


_UNPICKLE_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                    IndexError, KeyError, struct.error, MemoryError, OverflowError)  # fmt: skip


def _unpickle(blob: bytes, where: str) -> Any:
    try:
        return _ArraysOnlyUnpickler(io.BytesIO(blob), encoding="bytes").load()
    except _Refused as exc:
        raise DatasetFormatError(
            f"{where}: the pickle asks for {exc}, which a CIFAR file never needs; refusing to "
            "load it (the file is damaged or not the official CIFAR-100 file)"
        ) from None
    except _UNPICKLE_ERRORS as exc:
        raise DatasetFormatError(f"{where}: not a readable CIFAR pickle ({exc})") from exc


def _fields(obj: Any, keys: list[str], where: str) -> dict[str, Any]:
    """The pickle's dict with str keys (Python 2 wrote them as bytes), checked for `keys`."""
    if not isinstance(obj, dict):
        raise DatasetFormatError(f"{where}: expected a pickled dict, got {type(obj).__name__}")
    out = {k.decode("latin1") if isinstance(k, bytes) else str(k): v for k, v in obj.items()}
    missing = [k for k in keys if k not in out]
    if missing:
        raise DatasetFormatError(f"{where}: missing keys {missing}; found {sorted(out)}")
    return out


# -- EMNIST, the official gzip IDX files ----------------------------------------------------------
def _emnist_files(split: str) -> dict[str, str]:
    if split not in EMNIST_SPLITS:
        raise ValueError(f"EMNIST split must be one of {', '.join(EMNIST_SPLITS)}, got {split!r}")
    return {
        f"{key}_{part}": f"emnist-{split}-{part}-{kind}"
        for part in ("train", "test")
        for key, kind in (("x", "images-idx3-ubyte"), ("y", "labels-idx1-ubyte"))
    }


def _idx_path(folder: Path, name: str) -> Path | None:
    return next((p for p in (folder / f"{name}.gz", folder / name) if p.is_file()), None)


def find_emnist(data_dir: str | Path, split: str = "balanced") -> Path | None:
    """The folder (`data_dir` or `data_dir/gzip`) holding all four IDX files of `split`, or None."""
    files = _emnist_files(split)
    base = Path(data_dir).expanduser()
    for folder in (base, base / "gzip"):
        if all(_idx_path(folder, name) for name in files.values()):
            return folder
    return None


def read_emnist_idx(folder: str | Path, split: str = "balanced") -> dict[str, Any]:
    """Read official EMNIST IDX files (`.gz` or not) into upright uint8 (N, 28, 28, 1) images.

    Looks in `folder` and `folder/gzip`. The raw files store each image transposed; it is
    transposed back. Labels are as in the files; classes come from `emnist-<split>-mapping.txt`
    (`chr` of each code on a line), else str(label). Where the mapping starts above 0 (letters:
    1..26), labels are shifted to start at 0.
    """
    files = _emnist_files(split)
    base = Path(folder).expanduser()
    found = find_emnist(base, split)
    if found is None:
        raise DatasetNotFoundError(
            f"EMNIST {split!r} IDX files not found in {base} or {base / 'gzip'}; expected "
            f"{', '.join(f'{n}.gz' for n in files.values())} (from the official gzip.zip)"
        )
    out: dict[str, Any] = {}
    for key, name in files.items():
        path = _idx_path(found, name)
        assert path is not None  # find_emnist checked
        out[key] = _read_idx(path, dims=3 if key.startswith("x") else 1)
    for split_ in ("train", "test"):
        x, y = out[f"x_{split_}"], out[f"y_{split_}"]
        if len(x) != len(y):
            raise DatasetFormatError(
                f"{found}: the {split_} files hold {len(x)} images but {len(y)} labels"
            )
        out[f"x_{split_}"] = np.ascontiguousarray(x.transpose(0, 2, 1))[..., None]
        out[f"y_{split_}"] = y.astype(np.int64)
    if out["x_train"].shape[1:] != out["x_test"].shape[1:]:
        raise DatasetFormatError(
            f"{found}: train images are {out['x_train'].shape[1:3]} but test images are "
            f"{out['x_test'].shape[1:3]}"
        )
    mapping = next(
        (p for d in (found, base) if (p := d / f"emnist-{split}-mapping.txt").is_file()), None
    )
    top = int(max(out["y_train"].max(initial=0), out["y_test"].max(initial=0)))
    if mapping is None:
        out["classes"] = tuple(str(i) for i in range(top + 1))
        return out
    names = _read_mapping(mapping)
    first = min(names)
    if sorted(names) != list(range(first, first + len(names))):
        raise DatasetFormatError(
            f"{mapping}: labels {sorted(names)} are not consecutive; expected one line per label"
        )
    low = int(min(out["y_train"].min(initial=first), out["y_test"].min(initial=first)))
    if low < first or top >= first + len(names):
        raise DatasetFormatError(
            f"{found}: labels span [{low}, {top}] but {mapping.name} names labels "
            f"{first}..{first + len(names) - 1}"
        )
    for split_ in ("train", "test"):
        out[f"y_{split_}"] -= first
    out["classes"] = tuple(names[first + i] for i in range(len(names)))
    return out


def _read_mapping(path: Path) -> dict[int, str]:
    names: dict[int, str] = {}
    lines = path.read_text(encoding="ascii", errors="replace").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            label, *codes = (int(v) for v in line.split())
            if not codes or label in names:
                raise ValueError("expected 'label ascii_code', each label once")
            names[label] = "".join(chr(c) for c in codes)
        except (ValueError, OverflowError) as exc:
            raise DatasetFormatError(f"{path}: line {number} {line!r} is invalid ({exc})") from exc
    if not names:
        raise DatasetFormatError(f"{path}: the mapping file is empty")
    return names


def _read_idx(path: Path, dims: int) -> np.ndarray:
    """Parse an IDX file: 00 00, type byte (0x08 = uint8), dims byte, big-endian uint32 sizes."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DatasetFormatError(f"{path}: not a readable gzip file ({exc})") from exc
    what = "images (count, rows, cols)" if dims == 3 else "labels (count)"
    if len(raw) < 4 or raw[:2] != b"\0\0":
        raise DatasetFormatError(
            f"{path}: starts with bytes {raw[:4].hex(' ')!r}, not an IDX magic number "
            "(00 00 <type> <dims>); is this an EMNIST IDX file?"
        )
    if raw[2] != 0x08:
        raise DatasetFormatError(
            f"{path}: IDX type byte is 0x{raw[2]:02x}, expected 0x08 (unsigned bytes)"
        )
    if raw[3] != dims:
        raise DatasetFormatError(f"{path}: has {raw[3]} dimensions, expected {dims}: {what}")
    head = 4 + 4 * dims
    if len(raw) < head:
        raise DatasetFormatError(f"{path}: the IDX header is truncated ({len(raw)} bytes)")
    shape = struct.unpack(f">{dims}I", raw[4:head])
    expected = int(np.prod(shape, dtype=object))
    got = len(raw) - head
    if got != expected:
        why = "truncated" if got < expected else "trailing bytes"
        raise DatasetFormatError(
            f"{path}: holds {got} data bytes but its header declares {what} {shape} = "
            f"{expected} bytes ({why}); download the file again"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(shape)
