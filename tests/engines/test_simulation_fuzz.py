"""Hostile replies at the in-process engine: whatever a client's `handle` returns (a Reply of
any content, or not a Reply at all), `InProcessEngine.send` accepts it only if valid, else
records it under `rejected` with a reason; it never raises (but for the documented strict
mode ClientError), and a rejected reply never reaches the algorithm."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines import InProcessEngine
from cosmosfl.engines.simulation import ClientError
from cosmosfl.learners.base import Learner

N, M = 5, 2
LIMIT = 1 << 12
HONEST = np.tile(np.array([[0.25, 0.75]], np.float32), (N, 1))


class Fixed(Learner):
    num_classes = M

    def fit(self, x, y, *, epochs=1):  # type: ignore[no-untyped-def]
        return {}

    def predict_proba(self, x):  # type: ignore[no-untyped-def]
        return np.tile(np.array([[0.25, 0.75]], np.float32), (len(x), 1))

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):  # type: ignore[no-untyped-def]
        return {}


class Probe(Algorithm):
    """Its server state is what it received: the soft labels each client sent."""

    name = "probe"

    def __init__(self) -> None:
        self.received: dict[int, np.ndarray] = {}

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        replies = fed.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in fed.client_ids})
        self.received.update({c: r.arrays["probs"] for c, r in replies.items()})
        return RoundRecord()


ARRAYS = st.one_of(
    hnp.arrays(
        st.sampled_from(["float32", "float16", "float64", "int64", "uint8", "bool", "complex64"]),
        st.one_of(st.just((N, M)), hnp.array_shapes(min_dims=0, max_dims=3, max_side=6)),
    ),
    st.builds(lambda rows: np.broadcast_to(HONEST[:1], (rows, M)), st.integers(N, 10**9)),
    st.just(HONEST.T.copy()),
    st.just(HONEST[:3]),
    st.lists(st.lists(st.floats(0, 1), max_size=3), max_size=N),  # ragged lists
    st.none(),
)
REPLIES = st.one_of(
    st.builds(
        protocol.Reply,
        st.sampled_from([protocol.PREDICT_PUBLIC, protocol.PREDICT_PUBLIC, protocol.DISTILL, ""]),
        arrays=st.dictionaries(
            st.one_of(st.sampled_from(["probs", "probs.uint8", "x"]), st.integers(0, 2)),
            ARRAYS,
            max_size=2,
        ),
        metrics=st.dictionaries(
            st.text(max_size=3), st.one_of(st.floats(), st.integers(), st.text(max_size=2))
        ),
        error=st.one_of(st.none(), st.text(max_size=4)),
        error_kind=st.one_of(
            st.none(),
            st.sampled_from(["payload", "crash", "exception"]),
            st.just(np.array(["exception"] * 2)),
        ),
    ),
    st.none(),
    st.text(max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _engine(hostile: object, strict: bool) -> InProcessEngine:
    x, y = np.zeros((4, 1), np.float32), np.array([0, 1, 0, 1])
    clients = [Client(i, Fixed(), (x, y), (x, y)) for i in (0, 1)]
    clients[0].handle = lambda message: hostile  # type: ignore[method-assign]
    return InProcessEngine(
        clients, np.zeros((N, 1), np.float32), strict=strict, max_payload_bytes=LIMIT
    )


def _valid(a: object) -> bool:
    if not isinstance(a, np.ndarray) or a.shape != (N, M) or a.dtype.kind != "f":
        return False
    v = a.astype(np.float64)
    return bool(
        np.isfinite(v).all() and (v >= 0).all() and np.allclose(v.sum(1), 1, rtol=0, atol=1e-3)
    )


@pytest.mark.parametrize("strict", [False, True])
@given(hostile=REPLIES)
# Regressions: an array as error_kind raised "truth value ... is ambiguous" in strict mode; a
# ragged list raised ValueError while its bytes were counted (before validation).
@example(
    hostile=protocol.Reply(
        protocol.PREDICT_PUBLIC, error="x", error_kind=np.array(["exception"] * 2)
    )
)
@example(hostile=protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": [[0.5], [0.5, 0.5]]}))
def test_any_reply_is_accepted_if_valid_else_rejected_and_never_used(
    strict: bool, hostile: object
) -> None:
    probe = Probe()
    engine = _engine(hostile, strict)
    try:
        record = engine.run_round(probe, 1, 1)
    except ClientError:  # strict mode: a client's own exception is a bug to stop on
        assert strict and isinstance(hostile, protocol.Reply) and hostile.error_kind == "exception"
        return
    json.dumps(record, allow_nan=False)
    np.testing.assert_array_equal(probe.received[1], HONEST)
    rejected = [e for e in record["rejected"] if e["client"] == 0]
    if 0 in probe.received:
        assert _valid(probe.received[0]) and not rejected
    else:
        assert len(rejected) == 1 and rejected[0]["reason"]
