"""The client (client.py): tasks mapped to learner calls, incoming targets checked before
training, parameter tasks not served by default, construction errors. The task handlers' own
tests: tests/handlers/."""

import numpy as np
import pytest

from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.learners.base import Learner


class Recorder(Learner):
    """A stand-in learner that records what the client asks of it."""

    num_classes = 3

    def __init__(self):
        self.calls = []

    def fit(self, x, y, *, epochs=1):
        self.calls.append(("fit", len(x), epochs))
        return {"loss": 0.5}

    def predict_proba(self, x):
        return np.full((len(x), 3), 1 / 3, np.float32)

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        self.calls.append(
            ("distill", len(x), epochs, lam, None if weights is None else weights.copy())
        )
        return {"kl": 0.1}


def client(y=(0, 0, 1, 1, 1)):
    x = np.zeros((len(y), 2), np.float32)
    c = Client(0, Recorder(), (x, np.array(y)), (x[:2], np.array(y[:2])))
    c.public_x = np.zeros((4, 2), np.float32)
    return c


def targets(cls):
    t = np.zeros((4, 3), np.float32)
    t[np.arange(4), cls] = 1
    return t


def test_tasks_map_to_learner_calls():
    c = client()
    assert c.handle(protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 3})).metrics == {"loss": 0.5}
    assert c.learner.calls[-1] == ("fit", 5, 3)
    probs = c.handle(protocol.Message(protocol.PREDICT_PUBLIC)).arrays["probs"]
    assert probs.shape == (4, 3)
    r = c.handle(
        protocol.Message(
            protocol.DISTILL, {"epochs": 2, "lam": 5.0}, {"targets": targets([0, 1, 2, 0])}
        )
    )
    assert r.ok and c.learner.calls[-1][:4] == ("distill", 4, 2, 5.0)
    # uniform probabilities predict class 0; both test labels are 0
    assert c.handle(protocol.Message(protocol.EVALUATE)).metrics["top1"] == pytest.approx(1.0)


def test_bad_incoming_targets_are_refused_before_training():
    c = client()
    bad = targets([0, 1, 2, 0])
    bad[0, 0] = np.nan
    reply = c.handle(protocol.Message(protocol.DISTILL, {}, {"targets": bad}))
    assert not reply.ok and "non-finite" in reply.error
    assert not any(call[0] == "distill" for call in c.learner.calls)
    wrong = c.handle(
        protocol.Message(protocol.DISTILL, {}, {"targets": np.full((3, 3), 1 / 3, np.float32)})
    )
    assert not wrong.ok and "shape" in wrong.error


def test_parameter_tasks_are_not_served():
    reply = client().handle(protocol.Message(protocol.GET_WEIGHTS))
    assert not reply.ok and "not served" in reply.error


def test_client_construction_errors():
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="3 inputs but 2 labels"):
        Client(1, Recorder(), (x, np.zeros(2)), (x, np.zeros(3)))
    with pytest.raises(ValueError, match="no training data"):
        Client(1, Recorder(), (x[:0], np.zeros(0)), (x, np.zeros(3)))
