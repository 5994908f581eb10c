"""Hypothesis strategies for hostile Flower records: an honest RecordDict, then records removed,
fields retyped, arrays replaced by garbage bytes, pickles or arrays of the wrong kind."""

from __future__ import annotations

import io
import pickle

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

UNPICKLED: list[str] = []


def _detonate() -> None:  # what a pickle in a payload would run if anyone unpickled it
    UNPICKLED.append("executed")


class Bomb:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_detonate, ())


def npy_bytes(array: np.ndarray, *, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def pickled_array() -> Array:
    """A real .npy holding an object array (a pickle inside) that declares itself honestly."""
    data = npy_bytes(np.array([Bomb(), 1], dtype=object), allow_pickle=True)
    assert b"_detonate" in data and pickle.DEFAULT_PROTOCOL  # the pickle is really there
    return Array(dtype="object", shape=(2,), stype="numpy.ndarray", data=data)


def huge_declared(rows: int, cols: int) -> Array:
    """A .npy header declaring (rows, cols) float32 with no data behind it."""
    buf = io.BytesIO()
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, cols)}
    np.lib.format.write_array_header_1_0(buf, header)
    return Array(dtype="float32", shape=(rows, cols), stype="numpy.ndarray", data=buf.getvalue())


CONFIG_VALUES = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.just(10**400),  # beyond float range
    st.integers(-3, 3),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["protocol", "server_eval", "predict_public", "train_local", "evaluate"]),
    st.binary(max_size=8),
    st.booleans(),
    st.lists(st.integers(-3, 3), min_size=1, max_size=3),
    st.lists(st.text(max_size=3), min_size=1, max_size=2),
)
CONFIG_KEYS = st.sampled_from(
    ["size", "partition-id", "round", "kind", "task", "seconds", "error", "error_kind", "x"]
)
METRIC_VALUES = st.one_of(
    st.floats(),
    st.integers(-(2**70), 2**70),
    st.lists(st.floats(), min_size=1, max_size=2),
)
ARRAY_DTYPES = ("float32", "float64", "float16", "uint8", "int64", "bool", "complex64", "<U2")


@st.composite
def arrays(draw: st.DrawFn, n: int, m: int) -> Array:
    """A Flower Array that is wrong in some way, or occasionally right by chance."""
    choice = draw(st.integers(0, 6))
    if choice == 0:  # an honest encoding of an array of any dtype and shape
        dtype = draw(st.sampled_from(ARRAY_DTYPES))
        shape = draw(
            st.one_of(
                st.just((n, m)), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)
            )
        )
        return Array(draw(hnp.arrays(np.dtype(dtype), shape)))
    if choice == 1:  # garbage bytes that claim to be a float32 matrix
        data = draw(st.binary(max_size=64))
        return Array(dtype="float32", shape=(n, m), stype="numpy.ndarray", data=data)
    if choice == 2:  # a real .npy, truncated
        full = npy_bytes(np.full((n, m), 1 / m, np.float32))
        cut = draw(st.integers(0, len(full) - 1))
        return Array(dtype="float32", shape=(n, m), stype="numpy.ndarray", data=full[:cut])
    if choice == 3:
        return pickled_array()
    if choice == 4:
        return huge_declared(draw(st.integers(10**6, 10**12)), m)
    if choice == 5:  # metadata that lies about the data
        real = np.full((n, m), 1 / m, np.float32)
        shape = draw(st.sampled_from([(m, n), (n,), (n, m, 1)]))
        return Array(dtype="float64", shape=shape, stype="numpy.ndarray", data=npy_bytes(real))
    data = npy_bytes(np.full((n, m), 1 / m, np.float32))  # an unknown serialisation type
    return Array(dtype="float32", shape=(n, m), stype=draw(st.text(max_size=6)), data=data)


@st.composite
def mutated(draw: st.DrawFn, honest: RecordDict, n: int, m: int) -> RecordDict:
    """`honest` with 1-3 hostile edits (a fresh copy; `honest` is left as it was)."""
    content = RecordDict()
    for name, record in honest.items():
        content[name] = type(record)(dict(record))
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(st.sampled_from(["drop", "set", "unset", "array", "metrics"]))
        names = sorted(content.keys())
        if edit == "drop" and names:
            del content[draw(st.sampled_from(names))]
        elif edit in ("set", "unset"):
            configs = sorted(content.config_records.keys())
            if not configs:
                continue
            target = draw(st.sampled_from(configs))
            fields = dict(content.config_records[target])
            key = draw(CONFIG_KEYS)
            if edit == "set":
                fields[key] = draw(CONFIG_VALUES)
            else:
                fields.pop(key, None)
            content[target] = ConfigRecord(fields)
        elif edit == "array":
            target = draw(st.sampled_from(["0.arrays", "1.arrays", "2.arrays"]))
            record = content.array_records.get(target) or ArrayRecord()
            record = ArrayRecord(dict(record.items()))
            record[draw(st.sampled_from(["probs", "probs.uint8", "w"]))] = draw(arrays(n, m))
            content[target] = record
        else:
            target = draw(st.sampled_from(["0.metrics", "1.metrics"]))
            values = draw(st.dictionaries(st.sampled_from(["loss", "accuracy"]), METRIC_VALUES))
            content[target] = MetricRecord(values)
    return content
