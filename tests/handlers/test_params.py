"""The client side of the parameter-sharing baselines (handlers/params.py): weights in and out
of a model slot (refused when they do not fit), slots addressed by the message's config, and a
clear error for a learner without parameters."""

import numpy as np

from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.handlers import ditto, fedbabu
from cosmosfl.learners.sklearn import SklearnLearner

from ..algorithms.test_parameter_baselines import federation
from ..learners.test_torch import data, learner


def test_weights_of_the_wrong_shape_are_refused_by_the_client():
    from cosmosfl.handlers import params

    clients, _ = federation(3)
    c = clients[0]
    c.handlers = params.HANDLERS  # the weight tasks of the parameter-sharing baselines
    weights = c.learner.get_weights()
    name = next(iter(weights))
    wrong = dict(weights, **{name: np.zeros((3, 3), np.float32)})
    reply = c.handle(protocol.Message(protocol.SET_WEIGHTS, {}, wrong))
    assert not reply.ok and reply.error_kind == "payload" and "shape" in reply.error
    nan = dict(weights, **{name: np.full_like(weights[name], np.nan)})
    assert "non-finite" in c.handle(protocol.Message(protocol.SET_WEIGHTS, {}, nan)).error
    for key, value in c.learner.get_weights().items():  # nothing was loaded
        np.testing.assert_array_equal(value, weights[key])


def client(lrn=None):
    x, y = data()
    return Client(0, lrn or learner(), (x, y), (x[:8], y[:8]))


def test_slots_are_independent_copies_addressed_by_config():
    c = client()
    c.handlers = fedbabu.HANDLERS  # trains slots, and starts one from another (init_from)
    main_before = c.learner.get_weights()
    reply = c.handle(protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 1, "slot": "global"}))
    assert reply.ok and set(c.slots) == {"global"}
    for n, v in c.learner.get_weights().items():  # training the slot left `learner` alone
        np.testing.assert_array_equal(v, main_before[n])
    got = c.handle(protocol.Message(protocol.GET_WEIGHTS, {"slot": "global"}))
    assert got.metrics["num_samples"] == 48
    assert any(not np.array_equal(got.arrays[n], main_before[n]) for n in main_before)
    # init_from copies another slot's weights before training (0 epochs: a plain copy).
    c.handle(
        protocol.Message(
            protocol.TRAIN_LOCAL, {"epochs": 0, "slot": "personal", "init_from": "global"}
        )
    )
    for n, v in c.slots["personal"].get_weights().items():
        np.testing.assert_array_equal(v, got.arrays[n])
    # Client state covers the learner and every slot.
    state = c.get_state()
    fresh = client()
    fresh.set_state(state)
    for name in ("global", "personal"):
        for n, v in fresh.slots[name].get_weights().items():
            np.testing.assert_array_equal(v, c.slots[name].get_weights()[n])


def test_parameter_tasks_on_a_sklearn_client_are_a_clear_error():
    from sklearn.linear_model import LogisticRegression

    x, y = data()
    c = Client(
        0,
        SklearnLearner(LogisticRegression(), num_classes=3),
        (x.reshape(48, -1), y),
        (x[:8].reshape(8, -1), y[:8]),
        handlers=ditto.HANDLERS,
    )
    for message in (
        protocol.Message(protocol.GET_WEIGHTS),
        protocol.Message(protocol.TRAIN_LOCAL, {"slot": "global"}),
    ):
        reply = c.handle(message)
        assert not reply.ok and "SklearnLearner has none" in reply.error


def test_the_error_names_the_parameter_sharing_algorithms_from_their_classes():
    """The list comes from `model_agnostic` of the registered classes, not from a literal."""
    from dataclasses import dataclass
    from typing import ClassVar

    from sklearn.linear_model import LogisticRegression

    from cosmosfl.algorithms import FedAvg, register_algorithm, unregister_algorithm

    x, y = data()
    c = Client(
        0,
        SklearnLearner(LogisticRegression(), num_classes=3),
        (x.reshape(48, -1), y),
        (x[:8].reshape(8, -1), y[:8]),
        handlers=ditto.HANDLERS,
    )
    shipped = "(fedavg, fedprox, ditto, fedbabu, fedselect, pfedck, pfedhn)"
    assert shipped in c.handle(protocol.Message(protocol.GET_WEIGHTS)).error

    @dataclass
    class Averaging(FedAvg):
        name: ClassVar[str] = "averaging"

    register_algorithm(Averaging)
    try:
        error = c.handle(protocol.Message(protocol.GET_WEIGHTS)).error
        assert "(fedavg, fedprox, ditto, fedbabu, fedselect, pfedck, pfedhn, averaging)" in error
    finally:
        unregister_algorithm("averaging")
