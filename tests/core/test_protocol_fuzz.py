"""Hostile bytes at the protocol boundary: whatever a client sends, `validate_reply` either
accepts a payload that really satisfies its spec or rejects it with a PayloadError naming the
client and the fault. No other exception may escape (it would stop the server).

The acceptance oracle below is written from the spec's documented meaning, not from the
validator's code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cosmosfl.core import protocol

N, M = 5, 3
CTX = {"n": N, "m": M}
LIMIT = 4_096  # small, so "huge" payloads are cheap to declare (broadcast views)

DTYPES = (
    "float32",
    "float64",
    "float16",
    "int8",
    "uint8",
    "int64",
    "uint64",
    "bool",
    "complex64",
    "<U3",
    "S2",
    "datetime64[s]",
)
SHAPES = st.one_of(
    st.just((N, M)),
    st.tuples(st.integers(0, N + 1), st.integers(0, M + 1)),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)


@st.composite
def simplex_rows(draw: st.DrawFn, dtype: str = "float32") -> np.ndarray:
    """Valid soft labels (N, M), sometimes with one cell damaged."""
    seed = draw(st.integers(0, 2**32 - 1))
    rows = np.random.default_rng(seed).dirichlet(np.ones(M), size=N).astype(dtype)
    damage = draw(st.sampled_from([None, np.nan, np.inf, -np.inf, -0.25, 2.0, 0.0]))
    if damage is not None:
        rows[draw(st.integers(0, N - 1)), draw(st.integers(0, M - 1))] = damage
    return rows


@st.composite
def object_arrays(draw: st.DrawFn) -> np.ndarray:
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=4))
    out = np.empty(shape, dtype=object)
    values = st.one_of(st.none(), st.floats(), st.text(max_size=3), st.integers(), st.just([1]))
    for idx in np.ndindex(shape):
        out[idx] = draw(values)
    return out


@st.composite
def huge_views(draw: st.DrawFn) -> np.ndarray:
    """Arrays that declare far more bytes than the limit without allocating them."""
    dtype = draw(st.sampled_from(["float32", "float64", "uint8", "int64"]))
    rows = draw(st.integers(LIMIT, 10**12))
    return np.broadcast_to(np.zeros((1, M), dtype=dtype), (rows, M))


def any_array() -> st.SearchStrategy[np.ndarray]:
    return st.one_of(
        st.sampled_from(DTYPES).flatmap(lambda d: hnp.arrays(np.dtype(d), SHAPES)),
        st.sampled_from(["float32", "float16", "float64"]).flatmap(simplex_rows),
        hnp.arrays(np.uint8, (N, M)),  # labels-like and quantised-like
        hnp.arrays(np.int64, (N,), elements=st.integers(-2, M + 1)),
        object_arrays(),
        huge_views(),
    )


def any_value() -> st.SearchStrategy[object]:
    """What can sit where an array belongs: arrays, or anything else a buggy client returns."""
    return st.one_of(
        any_array(),
        st.none(),
        st.integers(),
        st.text(max_size=4),
        st.lists(st.floats(), max_size=3),
        st.binary(max_size=8),
    )


KEYS = st.one_of(
    st.sampled_from(["probs", "labels", "w", "probs.uint8", "probs.top_idx", "probs.top_val"]),
    st.text(max_size=6),
    st.integers(-2, 2),
    st.none(),
)
METRIC_VALUES = st.one_of(
    st.floats(),
    st.integers(),
    st.integers(min_value=10**308),  # too large for a float
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.lists(st.floats(), max_size=2),
    st.builds(np.float32, st.floats(width=32)),
)


@st.composite
def replies(draw: st.DrawFn, task: str = protocol.PREDICT_PUBLIC) -> protocol.Reply:
    arrays = draw(st.dictionaries(KEYS, any_value(), max_size=3))
    metrics = draw(st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), METRIC_VALUES))
    return protocol.Reply(
        draw(st.one_of(st.just(task), st.sampled_from(protocol.TASKS), st.text(max_size=4))),
        arrays=arrays,
        metrics=metrics,
        error=draw(st.one_of(st.none(), st.none(), st.text(max_size=5))),
    )


SPECS = {
    "probs": {"probs": protocol.PROBS},
    "labels": protocol.HARD_LABELS_REPLY,
    "weights": {"w": protocol.ArraySpec((None, M), dtypes=protocol.WEIGHT_DTYPES)},
    "any weights": protocol.WEIGHTS_ANY,
}


# -- the acceptance oracle: what each spec documents ---------------------------------------------
def _satisfies(array: object, spec: protocol.ArraySpec) -> bool:
    if not isinstance(array, np.ndarray) or array.size == 0 or array.nbytes > LIMIT:
        return False
    if spec.shape is not None:
        want = tuple(CTX[d] if isinstance(d, str) else d for d in spec.shape)
        if len(want) != array.ndim or any(
            w not in (None, s) for w, s in zip(want, array.shape, strict=True)
        ):
            return False
    if spec.kind == "labels":
        return array.dtype.kind in "iu" and int(array.min()) >= 0 and int(array.max()) < M
    if array.dtype.name not in spec.dtypes:
        return False
    with np.errstate(all="ignore"):
        values = array.astype(np.float64)
        if not np.all(np.isfinite(values)):
            return False
        if spec.kind == "probs":
            return bool((values >= 0).all() and np.allclose(values.sum(-1), 1, rtol=0, atol=1e-3))
    return True


def _reply_satisfies(reply: protocol.Reply, spec: dict[str, protocol.ArraySpec], task: str) -> bool:
    if reply.task != task or reply.error is not None:
        return False
    names = set(spec) - {protocol.ANY_NAME}
    if protocol.ANY_NAME not in spec and set(reply.arrays) != names:
        return False
    wildcard = spec.get(protocol.ANY_NAME)
    for name, array in reply.arrays.items():
        if not isinstance(name, str) or not _satisfies(array, spec.get(name, wildcard)):
            return False
    if sum(a.nbytes for a in reply.arrays.values()) > LIMIT:
        return False
    return all(isinstance(k, str) and _finite_number(v) for k, v in reply.metrics.items())


def _finite_number(value: object) -> bool:
    if not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _receive(
    reply: object, spec: dict[str, protocol.ArraySpec]
) -> protocol.Reply | protocol.PayloadError:
    try:
        return protocol.validate_reply(
            reply, spec, CTX, client_id=3, task=protocol.PREDICT_PUBLIC, max_bytes=LIMIT
        )
    except protocol.PayloadError as err:
        assert err.client_id == 3 and err.task == protocol.PREDICT_PUBLIC
        assert err.reason and "client 3" in str(err)
        return err


# -- properties ----------------------------------------------------------------------------------
@pytest.mark.parametrize("which", sorted(SPECS))
@given(array=any_value())
def test_any_single_array_is_accepted_only_if_it_meets_the_spec(which: str, array: object) -> None:
    spec = SPECS[which]
    name = "probs" if which == "any weights" else next(iter(spec))
    reply = protocol.Reply(protocol.PREDICT_PUBLIC, arrays={name: array})
    outcome = _receive(reply, spec)
    accepted = not isinstance(outcome, protocol.PayloadError)
    assert accepted == _reply_satisfies(reply, spec, protocol.PREDICT_PUBLIC)
    if accepted:
        assert outcome.arrays[name] is array  # accepted payloads are never "fixed" silently


@given(reply=replies())
@example(
    reply=protocol.Reply(protocol.PREDICT_PUBLIC, arrays={0: np.zeros(3), "probs": np.zeros(3)})
)
@example(reply=protocol.Reply(protocol.PREDICT_PUBLIC, arrays={None: np.zeros(3)}))
@example(reply=protocol.Reply(protocol.PREDICT_PUBLIC, metrics={"loss": 10**400}))
@example(reply=protocol.Reply(protocol.PREDICT_PUBLIC, metrics={0: 1.0}))
def test_any_reply_is_accepted_only_if_valid_else_rejected_with_a_reason(
    reply: protocol.Reply,
) -> None:
    spec = SPECS["probs"]
    outcome = _receive(reply, spec)
    assert (not isinstance(outcome, protocol.PayloadError)) == _reply_satisfies(
        reply, spec, protocol.PREDICT_PUBLIC
    )


@given(
    task=st.one_of(st.none(), st.integers(), st.just(np.array(["predict_public"]))),
    arrays=st.one_of(st.none(), st.lists(st.integers(), max_size=2), st.text(max_size=3)),
    metrics=st.one_of(st.none(), st.lists(st.integers(), max_size=2), st.floats()),
)
def test_replies_with_wrongly_typed_fields_are_rejected(
    task: object, arrays: object, metrics: object
) -> None:
    """An in-process client can return a Reply built from anything (dataclasses do not check)."""
    for bad in (
        protocol.Reply(task, {}, {}),  # type: ignore[arg-type]
        protocol.Reply(protocol.PREDICT_PUBLIC, arrays, {}),  # type: ignore[arg-type]
        protocol.Reply(protocol.PREDICT_PUBLIC, {"probs": np.full((N, M), 1 / M)}, metrics),  # type: ignore[arg-type]
    ):
        assert isinstance(_receive(bad, SPECS["probs"]), protocol.PayloadError)


def test_a_metric_too_large_for_a_float_is_rejected_not_an_overflow() -> None:
    reply = protocol.Reply(
        protocol.PREDICT_PUBLIC, {"probs": np.full((N, M), 1 / M)}, {"loss": 10**400}
    )
    err = _receive(reply, SPECS["probs"])
    assert isinstance(err, protocol.PayloadError) and "metric 'loss'" in err.reason


def test_array_names_that_are_not_strings_are_rejected_by_name() -> None:
    reply = protocol.Reply(
        protocol.PREDICT_PUBLIC, {0: np.zeros(3), "probs": np.full((N, M), 1 / M)}
    )
    err = _receive(reply, SPECS["probs"])
    assert isinstance(err, protocol.PayloadError) and "array names must be strings" in err.reason
