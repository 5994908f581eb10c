"""Warnings raised inside worker processes reach the parent as its own: on the command line
they print as one `cosmosfl: warning:` line, as in a serial run, never as raw Python ones."""

import warnings

import numpy as np
import pytest

from cosmosfl.cli.main import deprecations_shown
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines.workers import WorkerPool
from cosmosfl.learners.base import Learner

TEXT = "this learner ignores something it was given"


class Warns(Learner):
    num_classes = 2

    def fit(self, x, y, *, epochs=1):
        # as a warning raised in cosmosfl's own code would be (the CLI shows those as one line)
        warnings.warn_explicit(TEXT, UserWarning, "/site-packages/cosmosfl/learners/x.py", 7)
        return {}

    def predict_proba(self, x):
        return np.full((len(x), 2), 0.5, np.float32)

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        return {}


@pytest.fixture
def pool(monkeypatch, request):
    # Warns is this module's: the workers import it by name (tests.engines....)
    monkeypatch.syspath_prepend(str(request.config.rootpath))
    x, y = np.zeros((4, 1), np.float32), np.array([0, 1, 0, 1])
    clients = [Client(i, Warns(), (x, y), (x, y)) for i in range(2)]
    for c in clients:
        c.public_x = np.zeros((3, 1), np.float32)
    pool = WorkerPool(clients, 2)
    yield pool
    pool.close()


def train(pool):
    return pool.handle({i: protocol.Message(protocol.TRAIN_LOCAL) for i in (0, 1)})


def test_a_worker_warning_is_raised_in_the_parent(pool):
    with pytest.warns(UserWarning, match=TEXT):
        replies = train(pool)
    assert set(replies) == {0, 1}


def test_a_worker_warning_prints_as_one_cosmosfl_line(pool, capsys):
    with deprecations_shown():
        train(pool)
        train(pool)  # the next round's repeat is not shown again, as in a serial run
    err = capsys.readouterr().err
    assert err == f"cosmosfl: warning: {TEXT}\n"
