"""Hostile `.npz` datasets: random bytes, damaged archives, wrong keys, object arrays, arrays
of any dtype, shape and length, JPEG layouts with garbage offsets and bytes. `load_dataset`
returns a valid ImageDataset or raises DatasetFormatError with a message; never another
exception, and never a pickle loaded (object arrays would run code on np.load)."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cosmosfl.data import DatasetFormatError, load_dataset
from cosmosfl.data.npz import JPEG_KEYS, PLAIN_KEYS

UNPICKLED: list[str] = []


def _detonate() -> None:  # what a pickle in the file would run if anyone unpickled it
    UNPICKLED.append("executed")


class Bomb:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_detonate, ())


def _npz_bytes(arrays: dict[str, object]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # object arrays are stored as pickles (allow_pickle defaults on)
    return buf.getvalue()


def _valid_plain() -> dict[str, object]:
    x = np.zeros((4, 8, 8, 1), np.uint8)
    y = np.array([0, 1, 0, 1])
    return {"x_train": x, "y_train": y, "x_test": x[:2], "y_test": y[:2]}


ARRAYS = st.one_of(
    hnp.arrays(
        st.sampled_from(
            ["uint8", "int64", "int8", "float32", "bool", "<U2", "complex64", "datetime64[s]"]
        ),
        hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
    ),
    hnp.arrays(
        np.uint8, st.tuples(st.integers(0, 5), st.just(4), st.just(4), st.sampled_from([1, 3, 4]))
    ),
    hnp.arrays(np.int64, st.integers(0, 6), elements=st.integers(-2, 3)),
    st.just(np.array([Bomb(), 1], dtype=object)),
    st.just(np.array([[1, 2], [3]], dtype=object)),
)
KEYS = st.sampled_from([*PLAIN_KEYS, *JPEG_KEYS, "classes", "x_train.npy", "other"])


@st.composite
def npz_files(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 4))
    if kind == 0:  # plain or JPEG keys holding anything
        return _npz_bytes(draw(st.dictionaries(KEYS, ARRAYS, max_size=7)))
    if kind == 1:  # a valid file with one array replaced or removed
        arrays = _valid_plain()
        key = draw(st.sampled_from([*PLAIN_KEYS, "classes"]))
        if draw(st.booleans()):
            arrays.pop(key, None)
        else:
            arrays[key] = draw(ARRAYS)
        return _npz_bytes(arrays)
    if kind == 2:  # a valid file, truncated or with bytes flipped
        data = bytearray(_npz_bytes(_valid_plain()))
        for _ in range(draw(st.integers(0, 4))):
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
        return bytes(data[: draw(st.integers(0, len(data)))])
    if kind == 3:  # a zip of members that are not .npy files
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for name in draw(
                st.lists(st.sampled_from(["x_train.npy", "y_train.npy", "a"]), max_size=3)
            ):
                zf.writestr(name, draw(st.binary(max_size=40)))
        return buf.getvalue()
    prefix = draw(st.sampled_from([b"", b"PK\x03\x04", b"\x93NUMPY\x01\x00", b"\x80\x04"]))
    return prefix + draw(st.binary(max_size=80))  # random bytes (after a magic number)


@st.composite
def jpeg_layouts(draw: st.DrawFn) -> bytes:
    """The JPEG layout with garbage in its bytes, offsets or labels."""
    blobs = draw(st.lists(st.binary(min_size=1, max_size=30), min_size=1, max_size=3))
    buf = np.frombuffer(b"".join(blobs), np.uint8)
    offsets = np.cumsum([0, *map(len, blobs)])
    offsets = offsets.astype(draw(st.sampled_from(["int64", "uint8", "int8", "float64"])))
    if draw(st.booleans()):
        offsets = offsets[::-1].copy()
    arrays = {
        f"{s}_{k}": v for s in ("train", "test") for k, v in (("jpeg", buf), ("offsets", offsets))
    }
    arrays.update(y_train=np.zeros(len(blobs), np.int64), y_test=np.zeros(len(blobs), np.int64))
    return _npz_bytes(arrays)


def _load(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hostile.npz"
        path.write_bytes(data)
        try:
            ds = load_dataset(path, cache_dir=Path(tmp) / "cache")
        except DatasetFormatError as err:
            assert str(path) in str(err) or "hostile" in str(err)
        else:  # accepted: the documented layout, checked independently of the loader
            for x, y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
                assert x.dtype == np.uint8 and x.ndim == 4 and x.shape[-1] in (1, 3)
                assert y.dtype == np.int64 and len(y) == len(x) > 0
                assert y.min() >= 0 and y.max() < ds.num_classes
    assert UNPICKLED == []


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")  # zips we build on purpose
@settings(max_examples=max(10, settings().max_examples // 2))
@given(data=npz_files())
@example(data=_npz_bytes({**_valid_plain(), "y_train": np.array([Bomb(), 1], dtype=object)}))
@example(data=_npz_bytes({**_valid_plain(), "classes": np.array([Bomb()], dtype=object)}))
@example(data=_npz_bytes({**_valid_plain(), "y_train": np.array([0, 1, 0])}))  # lengths differ
def test_any_npz_file_is_a_dataset_or_a_format_error(data: bytes) -> None:
    _load(data)


@settings(max_examples=max(10, settings().max_examples // 2))
@given(data=jpeg_layouts())
def test_any_jpeg_layout_is_a_dataset_or_a_format_error(data: bytes) -> None:
    _load(data)


# Regressions found by the suites above (before: the exception named, with a traceback).
def test_an_empty_or_damaged_archive_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    path.write_bytes(b"")  # EOFError from np.load
    with pytest.raises(DatasetFormatError, match=r"not a readable \.npz file"):
        load_dataset(path, cache_dir=tmp_path / "c")
    data = bytearray(_npz_bytes(_valid_plain()))
    data[data.index(b"\x93NUMPY") + 200] ^= 1  # inside x_train's data: a bad CRC (BadZipFile)
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetFormatError, match=r"array 'x_train' is not readable .*CRC"):
        load_dataset(path, cache_dir=tmp_path / "c")


def test_object_arrays_are_refused_without_unpickling(tmp_path: Path) -> None:
    path = tmp_path / "o.npz"
    path.write_bytes(_npz_bytes({**_valid_plain(), "y_train": np.array([Bomb(), 1], object)}))
    with pytest.raises(DatasetFormatError, match="'y_train' could not be read without pickle"):
        load_dataset(path, cache_dir=tmp_path / "c")
    assert UNPICKLED == []


def test_decreasing_unsigned_jpeg_offsets_are_named(tmp_path: Path) -> None:
    """np.diff of uint8 offsets wrapped around, so decreasing offsets passed the check and
    failed later as an undecodable image."""
    buf = np.zeros(10, np.uint8)
    offsets = np.array([6, 3, 0], np.uint8)
    arrays = {
        f"{s}_{k}": v for s in ("train", "test") for k, v in (("jpeg", buf), ("offsets", offsets))
    }
    arrays.update(y_train=np.zeros(2, np.int64), y_test=np.zeros(2, np.int64))
    path = tmp_path / "j.npz"
    path.write_bytes(_npz_bytes(arrays))
    with pytest.raises(DatasetFormatError, match="train_offsets must increase strictly"):
        load_dataset(path, cache_dir=tmp_path / "c")
