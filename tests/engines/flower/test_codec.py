"""The Flower record codec (engines/flower/codec.py): a batch of messages and its replies
round-trip with their tasks, config types and arrays."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.core import protocol
from cosmosfl.engines.flower import codec


def test_codec_round_trip_keeps_tasks_config_types_and_arrays() -> None:
    targets = np.random.default_rng(0).dirichlet(np.ones(3), size=5).astype(np.float32)
    batch = codec.Batch(
        [
            protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 2}),
            protocol.Message(
                protocol.DISTILL, {"lam": 5.0, "client_weights": "uniform"}, {"targets": targets}
            ),
            codec.ServerEval({"name": "mlp", "width": 1.0}, {"w": np.arange(3, dtype=np.int64)}),
        ],
        round_num=7,
    )
    back = codec.decode_batch(codec.encode_batch(batch))
    assert back.round_num == 7
    first, second, third = back.items
    assert first == protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 2})
    assert isinstance(first.config["epochs"], int)
    assert second.task == protocol.DISTILL and second.config["lam"] == 5.0
    assert second.arrays["targets"].dtype == np.float32
    np.testing.assert_array_equal(second.arrays["targets"], targets)
    assert isinstance(third, codec.ServerEval) and third.arrays["w"].dtype == np.int64

    replies = [
        codec.ItemReply(
            codec.PROTOCOL, protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": targets})
        ),
        codec.ItemReply(
            codec.PROTOCOL, protocol.Reply(protocol.DISTILL, error="boom", error_kind="exception")
        ),
    ]
    pid, got = codec.decode_replies(codec.encode_replies(3, replies))
    assert pid == 3
    np.testing.assert_array_equal(got[0].reply.arrays["probs"], targets)
    assert got[1].reply.error == "boom" and got[1].reply.error_kind == "exception"
