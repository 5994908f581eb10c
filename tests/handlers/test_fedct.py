"""FedCT's client side (handlers/fedct.py): hard labels on U in the smallest integer type, and
training on the private data with U labelled by the consensus."""

import numpy as np

from cosmosfl.core import protocol

from ..test_client import client


def fedct_client():
    """A client serving FedCT's tasks (hard labels, training on U with consensus labels)."""
    from cosmosfl.handlers import fedct

    c = client()
    c.handlers = fedct.HANDLERS
    return c


def test_hard_label_prediction_sends_smallest_integer_type():
    c = fedct_client()
    reply = c.handle(protocol.Message(protocol.PREDICT_PUBLIC, {"hard": True}))
    labels = reply.arrays["labels"]
    assert labels.dtype == np.uint8 and labels.shape == (4,)
    assert protocol.message_bytes(reply) == 4  # one byte per public sample
    assert protocol.label_dtype(300) == np.uint16


def test_train_local_with_public_labels_trains_on_the_union():
    c = fedct_client()
    r = c.handle(
        protocol.Message(
            protocol.TRAIN_LOCAL, {"epochs": 1}, {"public_labels": np.array([0, 1, 2, 0], np.uint8)}
        )
    )
    assert r.ok and c.learner.calls[-1] == ("fit", 5 + 4, 1)
    bad = c.handle(
        protocol.Message(protocol.TRAIN_LOCAL, {}, {"public_labels": np.array([0, 1, 7, 0])})
    )
    assert not bad.ok and "[0, 3)" in bad.error
