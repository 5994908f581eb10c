"""The model-agnostic client tasks (handlers/default.py): the label-prior weights of
distillation."""

import numpy as np
import pytest

from cosmosfl.client import label_prior_weights
from cosmosfl.core import protocol

from ..test_client import client, targets


def test_label_prior_weights_use_only_the_clients_own_labels():
    # The client holds classes 0 and 1 (2:3); the teacher predicts 0, 1, 2, 0 on U.
    w = label_prior_weights(np.array([0, 0, 1, 1, 1]), targets([0, 1, 2, 0]), 3)
    # pi = (0.4, 0.6, 0); shares of predictions = (0.5, 0.25, 0.25)
    raw = np.array([0.4 / 0.5, 0.6 / 0.25, 0.0, 0.4 / 0.5])
    assert np.allclose(w, raw / raw.mean())
    assert w.mean() == pytest.approx(1.0)
    c = client()
    c.handle(
        protocol.Message(
            protocol.DISTILL, {"client_weights": "label-prior"}, {"targets": targets([0, 1, 2, 0])}
        )
    )
    assert np.allclose(c.learner.calls[-1][4], w)


def test_label_prior_falls_back_to_uniform_when_no_overlap():
    w = label_prior_weights(np.array([2, 2]), targets([0, 1, 0, 1]), 3)
    assert np.allclose(w, 1.0)
