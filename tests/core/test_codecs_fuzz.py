"""Hostile bytes in encoded payloads: `receive_reply` (decode, then validate: what both engines
do with every reply) either returns valid soft labels or raises a PayloadError with a reason;
no other exception, whatever the encoded parts hold. And every codec's honest encoding of any
valid matrix is accepted and decodes close to what was sent."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cosmosfl.core import codecs as C
from cosmosfl.core import protocol

N, M = 4, 5
CTX = {"n": N, "m": M}
LIMIT = 1 << 16

PART_DTYPES = ("uint8", "uint16", "int8", "int64", "float16", "float32", "bool", "complex64", "<U2")
PART_SHAPES = st.one_of(
    st.tuples(st.just(N), st.integers(0, M + 2)),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
)


def parts() -> st.SearchStrategy[object]:
    """What may arrive under an encoded name: arrays of any dtype and shape, or not an array."""
    return st.one_of(
        st.sampled_from(PART_DTYPES).flatmap(lambda d: hnp.arrays(np.dtype(d), PART_SHAPES)),
        hnp.arrays(np.uint8, (N, M)),  # right dtype and shape, rows rarely summing to 255
        hnp.arrays(np.uint8, (N, 2), elements=st.integers(0, M + 1)),  # top-2 indices
        hnp.arrays(np.float16, (N, 2), elements=st.floats(-1, 2, width=16)),  # top-2 values
        st.none(),
        st.lists(st.integers(0, 3), max_size=3),
        st.lists(st.lists(st.integers(), max_size=2), max_size=2),  # ragged
    )


ENCODED_NAMES = ("probs.uint8", "probs.top_idx", "probs.top_val", "probs", "other.top_idx")


def _is_soft_labels(a: np.ndarray) -> bool:
    v = a.astype(np.float64)
    return bool(
        a.shape == (N, M)
        and np.isfinite(v).all()
        and (v >= 0).all()
        and np.allclose(v.sum(axis=1), 1, rtol=0, atol=1e-3)
    )


def _receive(arrays: dict[str, object]) -> protocol.Reply | protocol.PayloadError:
    reply = protocol.Reply(protocol.PREDICT_PUBLIC, arrays=arrays)  # type: ignore[arg-type]
    try:
        return C.receive_reply(
            reply,
            {"probs": protocol.PROBS},
            CTX,
            client_id=2,
            task=protocol.PREDICT_PUBLIC,
            max_bytes=LIMIT,
        )
    except protocol.PayloadError as err:
        assert err.reason and err.client_id == 2
        return err


@given(arrays=st.dictionaries(st.sampled_from(ENCODED_NAMES), parts(), min_size=1, max_size=3))
@example(arrays={"probs.top_idx": [[0, 1]] * N, "probs.top_val": np.zeros((N, 2), np.float16)})
@example(
    arrays={"probs": np.full((N, M), 1 / M, np.float32), "probs.uint8": np.full((N, M), 51, "u1")}
)
@example(
    arrays={
        "probs.uint8": np.full((N, M), 51, np.uint8),
        "probs.top_idx": np.tile(np.arange(M, dtype=np.uint8), (N, 1)),
        "probs.top_val": np.full((N, M), 0.2, np.float16),
    }
)
def test_any_encoded_payload_decodes_to_valid_soft_labels_or_is_rejected(
    arrays: dict[str, object],
) -> None:
    outcome = _receive(arrays)
    if not isinstance(outcome, protocol.PayloadError):
        assert set(outcome.arrays) == {"probs"}
        assert _is_soft_labels(outcome.arrays["probs"])


def test_one_matrix_sent_twice_under_two_encodings_is_rejected_not_overwritten() -> None:
    """Regression: `probs` plain and `probs.uint8` together used to decode silently to one of
    them (the last written); the sender's intent is ambiguous, so the payload is refused."""
    plain = np.full((N, M), 1 / M, np.float32)
    q = np.zeros((N, M), np.uint8)
    q[:, 0] = 255
    err = _receive({"probs": plain, "probs.uint8": q})
    assert isinstance(err, protocol.PayloadError) and "more than one encoding" in err.reason


def test_array_names_that_are_not_strings_are_rejected_before_decoding() -> None:
    """Regression: a non-string name beside an encoded part raised AttributeError
    (`0.endswith`) in the decoder, which no engine catches."""
    err = _receive({0: np.zeros(2), "probs.uint8": np.full((N, M), 51, np.uint8)})
    assert isinstance(err, protocol.PayloadError) and "array names must be strings" in err.reason


@given(
    seed=st.integers(0, 2**32 - 1),
    codec=st.sampled_from(["float32", "float16", "uint8", "top1", "top2", f"top{M}", "top99"]),
    concentration=st.sampled_from([0.01, 0.3, 5.0]),
)
def test_every_codecs_honest_encoding_is_accepted(
    seed: int, codec: str, concentration: float
) -> None:
    sent = np.random.default_rng(seed).dirichlet(np.full(M, concentration), N).astype(np.float32)
    outcome = _receive(dict(C.encode_probs(sent, codec)))
    assert not isinstance(outcome, protocol.PayloadError), outcome
    got = outcome.arrays["probs"].astype(np.float64)
    assert _is_soft_labels(got)
    if codec in ("float32", "float16", "uint8", f"top{M}", "top99"):  # lossless up to rounding
        np.testing.assert_allclose(got, sent, atol=1 / 255 + 1e-3)
    else:  # top-k keeps the k largest of each row
        k = int(codec[3:])
        rows = np.arange(N)[:, None]
        top = np.argsort(-sent, axis=1, kind="stable")[:, :k]
        np.testing.assert_allclose(got[rows, top], sent[rows, top], atol=1e-3)
