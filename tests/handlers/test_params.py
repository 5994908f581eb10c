"""The client side of the parameter-sharing baselines (handlers/params.py): weights in and out
of a model slot, refused when they do not fit."""

import numpy as np

from cosmosfl.core import protocol as P

from ..algorithms.test_parameter_baselines import federation


def test_weights_of_the_wrong_shape_are_refused_by_the_client():
    from cosmosfl.handlers import params

    clients, _ = federation(3)
    c = clients[0]
    c.handlers = params.HANDLERS  # the weight tasks of the parameter-sharing baselines
    weights = c.learner.get_weights()
    name = next(iter(weights))
    wrong = dict(weights, **{name: np.zeros((3, 3), np.float32)})
    reply = c.handle(P.Message(P.SET_WEIGHTS, {}, wrong))
    assert not reply.ok and reply.error_kind == "payload" and "shape" in reply.error
    nan = dict(weights, **{name: np.full_like(weights[name], np.nan)})
    assert "non-finite" in c.handle(P.Message(P.SET_WEIGHTS, {}, nan)).error
    for key, value in c.learner.get_weights().items():  # nothing was loaded
        np.testing.assert_array_equal(value, weights[key])
