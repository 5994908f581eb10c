"""Injected corruption is always caught: for any valid payload (soft labels of any size and
codec dtype, or hard labels), every corruption class of engines/faults.py yields a payload the
engine's receive path rejects with a reason. A corruption that slipped through would let a
"corrupt" client poison aggregation while the records claim it was refused."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cosmosfl.core import codecs as C
from cosmosfl.core import protocol
from cosmosfl.engines.faults import CORRUPTIONS, corrupt_array

LIMIT = 1 << 14


@st.composite
def valid_payloads(draw: st.DrawFn) -> tuple[np.ndarray, dict[str, protocol.ArraySpec], dict]:
    n, m = draw(st.integers(1, 8)), draw(st.integers(2, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        labels = rng.integers(0, m, n).astype(protocol.label_dtype(m))
        return labels, protocol.HARD_LABELS_REPLY, {"n": n, "m": m}
    shape = draw(st.sampled_from(["dirichlet", "uniform", "one-hot"]))
    if shape == "dirichlet":
        probs = rng.dirichlet(np.full(m, draw(st.sampled_from([0.05, 1.0, 50.0]))), n)
    elif shape == "uniform":  # symmetric: a transposed square matrix is still on the simplex
        probs = np.full((n, m), 1 / m)
    else:
        probs = np.eye(m)[rng.integers(0, m, n)]
    dtype = draw(st.sampled_from(["float32", "float16", "float64"]))
    return probs.astype(dtype), {"probs": protocol.PROBS}, {"n": n, "m": m}


@given(payload=valid_payloads(), kind=st.sampled_from(CORRUPTIONS), seed=st.integers(0, 99))
def test_every_corruption_of_any_valid_payload_is_rejected(payload, kind: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    clean, spec, context = payload
    name = next(iter(spec))
    honest = protocol.Reply(protocol.PREDICT_PUBLIC, arrays={name: clean})
    C.receive_reply(
        honest, spec, context, client_id=1, task=protocol.PREDICT_PUBLIC, max_bytes=LIMIT
    )  # the clean payload passes
    bad = corrupt_array(clean, kind, np.random.default_rng(seed), m=context["m"], max_bytes=LIMIT)
    try:
        C.receive_reply(
            protocol.Reply(protocol.PREDICT_PUBLIC, arrays={name: bad}),
            spec,
            context,
            client_id=1,
            task=protocol.PREDICT_PUBLIC,
            max_bytes=LIMIT,
        )
    except protocol.PayloadError as err:
        assert err.reason
    else:
        raise AssertionError(f"corruption {kind!r} of {clean!r} was accepted: {bad!r}")
