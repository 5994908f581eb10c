"""Hostile Flower records: `decode_replies` (server side) and `decode_batch` (client side) turn
any RecordDict into well-typed replies or a RecordError naming what is wrong; no KeyError,
TypeError or numpy error escapes, and no pickle in a payload is ever loaded."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from cosmosfl.core import protocol
from cosmosfl.engines.flower import codec

from .hostile import UNPICKLED, huge_declared, mutated, pickled_array

N, M = 4, 3
PROBS = np.full((N, M), 1 / M, np.float32)
HONEST_REPLIES = codec.encode_replies(
    1,
    [
        codec.ItemReply(
            codec.PROTOCOL, protocol.Reply(protocol.TRAIN_LOCAL, metrics={"loss": 0.5}), 1.5
        ),
        codec.ItemReply(
            codec.PROTOCOL, protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": PROBS})
        ),
        codec.ItemReply(
            codec.SERVER_EVAL, protocol.Reply(protocol.EVALUATE, metrics={"accuracy": 0.9})
        ),
    ],
)
HONEST_BATCH = codec.encode_batch(
    codec.Batch(
        [
            protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 1}),
            protocol.Message(protocol.DISTILL, {"lam": 1.0}, {"targets": PROBS}),
            codec.ServerEval({"name": "mlp"}, {"w": np.zeros(3, np.float32)}),
        ],
        round_num=2,
    )
)


def _well_typed(item: codec.ItemReply) -> bool:
    r = item.reply
    return (
        item.kind in (codec.PROTOCOL, codec.SERVER_EVAL)
        and math.isfinite(item.seconds)
        and item.seconds >= 0
        and isinstance(r.task, str)
        and all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in r.arrays.items())
        and all(x is None or isinstance(x, str) for x in (r.error, r.error_kind, r.traceback))
    )


@given(content=mutated(HONEST_REPLIES, N, M))
def test_any_reply_record_decodes_to_well_typed_replies_or_a_record_error(
    content: RecordDict,
) -> None:
    try:
        pid, items = codec.decode_replies(content)
    except codec.RecordError as err:
        assert str(err)
    else:
        assert isinstance(pid, int) and pid >= 0
        assert all(_well_typed(item) for item in items)
    assert UNPICKLED == []


@given(content=mutated(HONEST_BATCH, N, M))
def test_any_batch_record_decodes_to_messages_or_a_record_error(content: RecordDict) -> None:
    try:
        batch = codec.decode_batch(content)
    except codec.RecordError as err:
        assert str(err)
    else:
        assert isinstance(batch.round_num, int)
        for item in batch.items:
            assert isinstance(item, protocol.Message | codec.ServerEval)
            assert all(isinstance(v, np.ndarray) for v in item.arrays.values())
    assert UNPICKLED == []


def _with(record_name: str, record: object) -> RecordDict:
    content = RecordDict()
    for name, value in HONEST_REPLIES.items():
        content[name] = value
    content[record_name] = record  # type: ignore[assignment]
    return content


def _error(content: RecordDict) -> str:
    with pytest.raises(codec.RecordError) as err:
        codec.decode_replies(content)
    return str(err.value)


# Regressions: each of these escaped decode_replies as a KeyError, TypeError, ValueError or
# numpy error before RecordError existed, and stopped the ServerApp.
def test_a_missing_record_is_named() -> None:
    content = _with("x", ConfigRecord({}))
    del content["1.head"]
    assert "config record '1.head' is missing" in _error(content)
    del content[codec.CLIENT]
    assert "'client' is missing" in _error(content)


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        ({"partition-id": "1", "size": 3}, "['partition-id'] = '1' must be int"),
        ({"partition-id": 1, "size": 2.0}, "['size'] = 2.0 must be int"),
        ({"partition-id": 1, "size": True}, "['size'] = True must be int"),
        ({"partition-id": -1, "size": 3}, "must be >= 0"),
        ({"partition-id": 1}, "['size'] is missing"),
    ],
)
def test_wrongly_typed_client_fields_are_named(head: dict, reason: str) -> None:
    assert reason in _error(_with(codec.CLIENT, ConfigRecord(head)))


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        ({"kind": "protocol", "task": b"predict_public"}, "['task'] = b'predict_public'"),
        ({"kind": "nonsense", "task": "predict_public"}, "is not protocol or server_eval"),
        ({"kind": "protocol", "task": "predict_public", "seconds": math.nan}, "finite"),
        ({"kind": "protocol", "task": "predict_public", "seconds": 10**400}, "finite"),
        ({"kind": "protocol", "task": "predict_public", "error": 3}, "['error'] = 3"),
    ],
)
def test_wrongly_typed_item_fields_are_named(head: dict, reason: str) -> None:
    assert reason in _error(_with("1.head", ConfigRecord(head)))


@pytest.mark.parametrize(
    ("array", "reason"),
    [
        (Array(dtype="float32", shape=(N, M), stype="numpy.ndarray", data=b"junk"), "decode"),
        (pickled_array(), "does not decode: ValueError"),
        (huge_declared(10**12, M), "does not decode"),
        (Array(PROBS.T.copy()), None),  # decodes; the protocol rejects the shape later
    ],
)
def test_undecodable_arrays_are_a_record_error_and_pickles_are_never_loaded(
    array: Array, reason: str | None
) -> None:
    content = _with("1.arrays", ArrayRecord({"probs": array}))
    if reason is None:
        _, items = codec.decode_replies(content)
        assert items[1].reply.arrays["probs"].shape == (M, N)
    else:
        assert reason in _error(content)
    assert UNPICKLED == []


def test_an_array_whose_metadata_lies_about_its_data_is_refused() -> None:
    lying = Array(dtype="float32", shape=(N,), stype="numpy.ndarray", data=Array(PROBS).data)
    assert "declares float32 (4,) but holds float32 (4, 3)" in _error(
        _with("1.arrays", ArrayRecord({"probs": lying}))
    )


@given(size=st.integers(-5, 2**63 - 1))
def test_any_declared_batch_size_decodes_or_is_refused_quickly(size: int) -> None:
    content = _with(codec.CLIENT, ConfigRecord({"partition-id": 1, "size": size}))
    try:
        _, items = codec.decode_replies(content)
    except codec.RecordError:
        assert size < 0 or size > 3
    else:
        assert len(items) == size <= 3
