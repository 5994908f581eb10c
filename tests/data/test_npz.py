"""The JPEG .npz layout: decoded once, cached atomically, re-decoded when the source changes."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import cosmosfl.data.npz as npz_module
import cosmosfl.data.sources as sources
from cosmosfl.data import DatasetFormatError, load_dataset

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (250, 250, 250), (10, 10, 10)]


def _jpeg_bytes(colour: tuple[int, ...], mode: str = "RGB", size: int = 8) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, (size, size), colour if mode == "RGB" else colour[0]).save(buf, "JPEG")
    return buf.getvalue()


def _jpeg_npz(path: Path, n_train: int = 5, n_test: int = 3, mode: str = "RGB") -> Path:
    arrays: dict[str, np.ndarray] = {}
    for split, n in (("train", n_train), ("test", n_test)):
        blobs = [_jpeg_bytes(COLOURS[i % len(COLOURS)], mode) for i in range(n)]
        arrays[f"{split}_jpeg"] = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        arrays[f"{split}_offsets"] = np.cumsum([0, *map(len, blobs)]).astype(np.int64)
        arrays[f"y_{split}"] = np.arange(n, dtype=np.int64) % 2
    arrays["classes"] = np.array(["even", "odd"])
    np.savez(path, **arrays)
    return path


# -- decoding and the cache ---------------------------------------------------------------------
def test_jpeg_layout_decodes_and_is_cached(tmp_path: Path, monkeypatch) -> None:
    source = _jpeg_npz(tmp_path / "tiny_jpeg.npz")
    cache = tmp_path / "cache"
    ds = load_dataset(source, cache_dir=cache)
    assert ds.x_train.shape == (5, 8, 8, 3) and ds.x_test.shape == (3, 8, 8, 3)
    assert ds.classes == ("even", "odd") and ds.natural
    assert np.array_equal(ds.y_train, [0, 1, 0, 1, 0])
    for i in range(5):  # solid colours survive JPEG up to small errors
        assert np.abs(ds.x_train[i].astype(int) - COLOURS[i]).max() <= 8
    assert len(list(cache.glob("*.npz"))) == 1

    def must_not_decode(*args, **kwargs):
        raise AssertionError("decoded again although a cache exists")

    monkeypatch.setattr(npz_module, "decode_jpeg_split", must_not_decode)
    cached = load_dataset(source, cache_dir=cache)
    assert np.array_equal(cached.x_train, ds.x_train) and np.array_equal(cached.y_test, ds.y_test)


def test_jpeg_cache_is_refreshed_when_the_source_changes(tmp_path: Path, monkeypatch) -> None:
    source = _jpeg_npz(tmp_path / "tiny_jpeg.npz", n_train=4)
    cache = tmp_path / "cache"
    assert len(load_dataset(source, cache_dir=cache).y_train) == 4
    calls = []
    real = npz_module.decode_jpeg_split

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(npz_module, "decode_jpeg_split", counting)
    stat = source.stat()
    _jpeg_npz(source, n_train=6)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert len(load_dataset(source, cache_dir=cache).y_train) == 6
    assert len(calls) == 2  # train and test decoded again
    assert len(list(cache.glob("*.npz"))) == 1  # the stale copy is gone


def test_jpeg_cache_dir_from_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COSMOSFL_CACHE_DIR", str(tmp_path / "envcache"))
    load_dataset(_jpeg_npz(tmp_path / "t.npz"))
    assert len(list((tmp_path / "envcache").glob("t-*.npz"))) == 1
    monkeypatch.delenv("COSMOSFL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert sources.default_cache_dir() == tmp_path / "xdg" / "cosmosfl"


def test_grayscale_jpeg_gets_one_channel(tmp_path: Path) -> None:
    ds = load_dataset(_jpeg_npz(tmp_path / "g.npz", mode="L"), cache_dir=tmp_path / "c")
    assert ds.x_train.shape == (5, 8, 8, 1) and not ds.natural


def test_jpeg_layout_with_bad_offsets(tmp_path: Path) -> None:
    path = _jpeg_npz(tmp_path / "j.npz")
    with np.load(path) as raw:
        arrays = dict(raw)
    arrays["train_offsets"] = arrays["train_offsets"][:-1]
    np.savez(path, **arrays)
    with pytest.raises(DatasetFormatError, match="train_offsets describes 4 images"):
        load_dataset(path, cache_dir=tmp_path / "c")
    del arrays["test_jpeg"]
    np.savez(path, **arrays)
    with pytest.raises(DatasetFormatError, match="test_jpeg"):
        load_dataset(path, cache_dir=tmp_path / "c")


def test_corrupt_cache_is_replaced_by_a_fresh_decode(tmp_path: Path) -> None:
    source = _jpeg_npz(tmp_path / "t.npz")
    cache = tmp_path / "cache"
    first = load_dataset(source, cache_dir=cache)
    (cached,) = cache.glob("*.npz")
    cached.write_bytes(b"truncated")
    again = load_dataset(source, cache_dir=cache)
    assert np.array_equal(again.x_train, first.x_train)
    assert np.load(cached)["x_train"].shape == first.x_train.shape  # rewritten, readable again


def test_unwritable_cache_still_loads(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache folder should be")
    ds = load_dataset(_jpeg_npz(tmp_path / "t.npz"), cache_dir=blocker)
    assert ds.x_train.shape == (5, 8, 8, 3)
    assert not list(tmp_path.glob("**/*.tmp"))  # no temp files left behind
