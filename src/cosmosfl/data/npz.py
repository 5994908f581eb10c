"""Reading dataset `.npz` files: plain arrays, or JPEG bytes decoded once and cached.

Plain layout: `x_train, y_train, x_test, y_test` (+ optional `classes`). JPEG layout: per split a
flat byte buffer `<split>_jpeg` and `<split>_offsets` (length N+1), labels `y_<split>`. Decoding
60k images takes seconds, so the decoded arrays are cached as a plain `.npz` whose name carries
the source's path, size and mtime: a changed source is decoded again, never served stale.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import struct
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.data.errors import DatasetFormatError

log = logging.getLogger(__name__)

PLAIN_KEYS = ("x_train", "y_train", "x_test", "y_test")
JPEG_KEYS = ("train_jpeg", "train_offsets", "y_train", "test_jpeg", "test_offsets", "y_test")
_CACHE_VERSION = 1
_LAYOUTS = (
    f"plain arrays {', '.join(PLAIN_KEYS)} (optional classes), or "
    f"JPEG bytes {', '.join(JPEG_KEYS)} (optional classes)"
)


def read_npz(path: Path, cache_dir: Path) -> dict[str, np.ndarray]:
    """Return the plain arrays stored in `path` (either layout), decoding JPEGs via the cache."""
    with _open(path) as data:
        files = set(data.files)
        if "train_jpeg" in files or "test_jpeg" in files:
            return _read_jpeg_layout(path, data, cache_dir)
        missing = [k for k in PLAIN_KEYS if k not in files]
        if missing:
            raise DatasetFormatError(
                f"{path}: missing arrays {missing}; found {sorted(files)}. "
                f"Expected one of two layouts: {_LAYOUTS}"
            )
        keys = [*PLAIN_KEYS, *(["classes"] if "classes" in files else [])]
        return {k: _get(path, data, k) for k in keys}


# What numpy and zipfile raise on a damaged or hostile file: a truncated archive (EOFError),
# a bad CRC or member header (BadZipFile), an unknown compression (NotImplementedError), a
# malformed .npy header (ValueError, struct.error, zlib.error), a header declaring more data
# than memory holds (MemoryError). All mean one thing to a user: the file is not readable.
_UNREADABLE = (
    ValueError,
    OSError,
    EOFError,
    zipfile.BadZipFile,
    NotImplementedError,
    MemoryError,
    struct.error,
    zlib.error,
)


def _open(path: Path) -> np.lib.npyio.NpzFile:
    try:
        data = np.load(path, allow_pickle=False)
    except _UNREADABLE as exc:
        raise DatasetFormatError(f"{path}: not a readable .npz file ({_reason(exc)})") from exc
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise DatasetFormatError(f"{path}: holds a single array, expected an .npz with {_LAYOUTS}")
    return data


def _get(path: Path, data: np.lib.npyio.NpzFile, key: str) -> np.ndarray:
    try:
        return data[key]
    except ValueError as exc:
        if "pickle" in str(exc):  # object arrays need pickle, which we refuse to load
            raise DatasetFormatError(
                f"{path}: array {key!r} could not be read without pickle ({exc}); store "
                "numeric arrays and classes as a unicode string array"
            ) from exc
        raise DatasetFormatError(f"{path}: array {key!r} is not readable ({_reason(exc)})") from exc
    except _UNREADABLE as exc:
        raise DatasetFormatError(f"{path}: array {key!r} is not readable ({_reason(exc)})") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


# -- the JPEG layout ---------------------------------------------------------------------------
def _read_jpeg_layout(
    path: Path, data: np.lib.npyio.NpzFile, cache_dir: Path
) -> dict[str, np.ndarray]:
    missing = [k for k in JPEG_KEYS if k not in data.files]
    if missing:
        raise DatasetFormatError(
            f"{path}: JPEG layout is missing arrays {missing}; found {sorted(data.files)}"
        )
    cache = cache_path(path, cache_dir)
    if cache.is_file():
        try:
            with np.load(cache, allow_pickle=False) as cached:
                decoded = {k: cached[k] for k in cached.files}
            if all(k in decoded for k in PLAIN_KEYS):
                return decoded
            log.warning("cache %s is incomplete; decoding %s again", cache, path)
        except _UNREADABLE as exc:
            log.warning("cache %s is unreadable (%s); decoding %s again", cache, exc, path)
    arrays: dict[str, np.ndarray] = {}
    for split in ("train", "test"):
        buf = _get(path, data, f"{split}_jpeg")
        offsets = _get(path, data, f"{split}_offsets")
        labels = _get(path, data, f"y_{split}")
        _check_offsets(path, split, buf, offsets, labels)
        _announce(path, split, len(offsets) - 1)
        arrays[f"x_{split}"] = decode_jpeg_split(buf, offsets, description=f"{path.name} {split}")
        arrays[f"y_{split}"] = labels
    if "classes" in data.files:
        arrays["classes"] = _get(path, data, "classes")
    _write_cache(cache, arrays)
    return arrays


def _check_offsets(
    path: Path, split: str, buf: np.ndarray, offsets: np.ndarray, labels: np.ndarray
) -> None:
    if buf.ndim != 1 or buf.dtype != np.uint8:
        raise DatasetFormatError(
            f"{path}: {split}_jpeg must be a flat uint8 byte buffer, got shape {buf.shape} "
            f"dtype {buf.dtype}"
        )
    if offsets.ndim != 1 or not np.issubdtype(offsets.dtype, np.integer) or len(offsets) < 1:
        raise DatasetFormatError(
            f"{path}: {split}_offsets must be a 1-D integer array of length N+1, got shape "
            f"{offsets.shape} dtype {offsets.dtype}"
        )
    if len(offsets) - 1 != len(labels):
        raise DatasetFormatError(
            f"{path}: {split}_offsets describes {len(offsets) - 1} images but y_{split} has "
            f"{len(labels)} labels (offsets must have length N+1)"
        )
    # int64 first: np.diff of unsigned offsets wraps around, so decreasing ones would pass.
    steps = np.diff(offsets.astype(np.int64))
    if offsets[0] < 0 or offsets[-1] > len(buf) or np.any(steps <= 0):
        raise DatasetFormatError(
            f"{path}: {split}_offsets must increase strictly from >= 0 to <= {len(buf)} "
            f"(the buffer length); got first {offsets[0]}, last {offsets[-1]}"
        )


def decode_jpeg_split(buf: np.ndarray, offsets: np.ndarray, *, description: str) -> np.ndarray:
    """Decode images buf[offsets[i]:offsets[i+1]] into one uint8 (N, H, W, C) array."""
    from PIL import Image

    n = len(offsets) - 1
    if n == 0:
        raise DatasetFormatError(f"{description}: the split holds no images")
    out: np.ndarray | None = None
    mode = "RGB"
    with _Progress(description, n) as advance:
        for i in range(n):
            raw = buf[offsets[i] : offsets[i + 1]].tobytes()
            try:
                with Image.open(io.BytesIO(raw)) as img:
                    if out is None:
                        mode = "L" if img.mode in ("1", "L", "I", "I;16", "F") else "RGB"
                    pixels = np.asarray(img.convert(mode), dtype=np.uint8)
            except OSError as exc:
                raise DatasetFormatError(
                    f"{description}: image {i} is not decodable ({exc})"
                ) from exc
            if pixels.ndim == 2:
                pixels = pixels[:, :, None]
            if out is None:
                out = np.empty((n, *pixels.shape), dtype=np.uint8)
            if pixels.shape != out.shape[1:]:
                raise DatasetFormatError(
                    f"{description}: image {i} has shape {pixels.shape}, but image 0 has "
                    f"{out.shape[1:]}; all images must share one size"
                )
            out[i] = pixels
            if (i + 1) % 500 == 0 or i + 1 == n:
                advance((i % 500) + 1)
    assert out is not None
    return out


def _announce(path: Path, split: str, n: int) -> None:
    log.info("decoding %d %s images from %s (one-time cost, the result is cached)", n, split, path)


class _Progress:
    """A rich progress bar on an interactive stderr; a no-op otherwise (logs, CI, tests)."""

    def __init__(self, description: str, total: int) -> None:
        self.description, self.total = description, total
        self._bar: Any = None

    def __enter__(self) -> Callable[[int], object]:
        if not sys.stderr.isatty():
            return lambda steps: None
        from rich.console import Console
        from rich.progress import Progress

        bar = self._bar = Progress(console=Console(stderr=True), transient=True)
        bar.start()
        task = bar.add_task(
            f"decoding {self.description} (one-time, cached afterwards)", total=self.total
        )
        return lambda steps: bar.advance(task, steps)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


# -- the cache ---------------------------------------------------------------------------------
def cache_path(source: Path, cache_dir: Path) -> Path:
    """Where the decoded copy of `source` lives; the name changes whenever the source does."""
    resolved = source.resolve()
    st = resolved.stat()
    where = hashlib.sha256(f"v{_CACHE_VERSION}:{resolved}".encode()).hexdigest()[:12]
    return cache_dir / f"{source.stem}-{where}-{st.st_size}-{st.st_mtime_ns}.npz"


def _write_cache(cache: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write atomically (temp file + os.replace) and drop stale copies of the same source."""
    stem_and_where = cache.name.rsplit("-", 2)[0]
    tmp = None
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=f".{cache.stem}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, cache)
        tmp = None
    except OSError as exc:
        log.warning("could not write the decode cache %s (%s); continuing without it", cache, exc)
        return
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    for old in cache.parent.iterdir():
        if old.name.startswith(f"{stem_and_where}-") and old.suffix == ".npz" and old != cache:
            old.unlink(missing_ok=True)
