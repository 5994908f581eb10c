"""A bad client is never silent in Python: `simulate(strict=True)` stops at the first rejected
reply (bad probabilities, a NaN loss, an error) naming the client, the task and the reason;
`strict=False` warns with the same text and goes on; injected faults stay quiet either way."""

import math
import warnings

import numpy as np
import pytest

from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.local import Local
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines.faults import FaultConfig, FaultInjector
from cosmosfl.engines.simulation import ClientError, ClientRejectedError, ClientRejectedWarning
from cosmosfl.experiment import simulate
from cosmosfl.experiment.result import NotEvaluatedError
from cosmosfl.learners.base import Learner, accuracy_metrics

M = 3


class Fake(Learner):
    """A numpy-only learner: predicts a fixed distribution (or what `probs` makes), reports
    `loss` from fit, or raises when `fail` is set."""

    num_classes = M

    def __init__(self, probs=None, loss=0.5, fail=False):
        self.probs, self.loss, self.fail = probs, loss, fail
        self.fits = 0

    def fit(self, x, y, *, epochs=1):
        self.fits += 1
        if self.fail:
            raise RuntimeError("disk full")
        return {"loss": self.loss}

    def predict_proba(self, x):
        if self.probs is not None:
            return self.probs(len(x))
        return np.tile(np.array([[0.2, 0.3, 0.5]], np.float32), (len(x), 1))

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        return {"loss": 0.1}

    def evaluate(self, x, y):
        return accuracy_metrics(self.predict_proba(x), y)

    def get_state(self):  # COSMOS copies server models when clusters change under faults
        return {"fits": self.fits}

    def set_state(self, state):
        self.fits = state["fits"]


def off_simplex(n):
    return np.full((n, M), 0.5, np.float32)  # rows sum to 1.5


def nan_probs(n):
    out = np.full((n, M), 1 / M, np.float32)
    out[0, 0] = np.nan
    return out


def federation(*learners, features=4):
    rng = np.random.default_rng(0)
    clients = []
    for i, learner in enumerate(learners):
        x = rng.normal(size=(12, features)).astype(np.float32)
        y = np.arange(12) % M
        clients.append(Client(i, learner, (x, y), (x[:6], y[:6])))
    return clients, rng.normal(size=(8, features)).astype(np.float32)


def fake_server(sample_shape, num_classes, seed):
    return Fake()


def cosmos():
    return Cosmos(
        target_clusters=1,
        server_learner=fake_server,
        lam=0.0,
        pretrain_epochs=1,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
    )


def test_strict_stops_when_probabilities_are_off_the_simplex_in_cosmos():
    clients, u = federation(Fake(), Fake(), Fake(probs=off_simplex))
    with pytest.raises(ClientRejectedError) as err:
        simulate(cosmos(), clients, u, rounds=2)
    text = str(err.value)
    assert "round 1: client 2's reply to task 'predict_public' was rejected" in text
    assert "sums to 1.5" in text and "predict_proba must return" in text
    assert "strict=False" in text  # says how to go on without this client
    assert (err.value.client_id, err.value.task) == (2, protocol.PREDICT_PUBLIC)


def test_non_strict_warns_with_the_same_text_and_leaves_the_client_out_of_clustering():
    clients, u = federation(Fake(), Fake(), Fake(probs=off_simplex))
    with pytest.warns(ClientRejectedWarning) as caught:
        result = simulate(cosmos(), clients, u, rounds=2, strict=False)
    texts = [str(w.message) for w in caught if issubclass(w.category, ClientRejectedWarning)]
    assert len(texts) == 2  # one per round
    assert all("client 2's reply to task 'predict_public' was rejected" in t for t in texts)
    assert "round 1:" in texts[0] and "round 2:" in texts[1]
    assert len(result.records) == 2
    assert 2 not in result.clusters and set(result.clusters) == {0, 1}
    assert [r["client"] for r in result.records[-1]["rejected"]] == [2]


def test_strict_stops_on_nan_probabilities():
    clients, u = federation(Fake(), Fake(probs=nan_probs))
    with pytest.raises(ClientRejectedError, match=r"client 1's reply to task 'predict_public'"):
        simulate(cosmos(), clients, u, rounds=1)


@pytest.mark.parametrize("loss", [math.nan, math.inf])
def test_strict_stops_on_a_non_finite_training_loss(loss):
    clients, u = federation(Fake(), Fake(loss=loss))
    with pytest.raises(ClientRejectedError) as err:
        simulate(Local(pretrain_epochs=1, local_epochs=1), clients, u, rounds=2)
    assert (err.value.round_num, err.value.client_id, err.value.task) == (
        1,
        1,
        protocol.TRAIN_LOCAL,
    )
    assert "metric 'loss' is not a finite number" in str(err.value)
    assert "lower the learning rate" in str(err.value)


def test_non_strict_warns_on_a_nan_loss_and_finishes():
    clients, u = federation(Fake(), Fake(loss=math.nan))
    with pytest.warns(ClientRejectedWarning, match=r"client 1's reply to task 'train_local'"):
        result = simulate(
            Local(pretrain_epochs=1, local_epochs=1), clients, u, rounds=2, strict=False
        )
    assert len(result.records) == 2
    assert all(r["rejected"][0]["client"] == 1 for r in result.records)


def test_client_code_that_raises_warns_when_not_strict():
    clients, u = federation(Fake(), Fake(fail=True))
    with pytest.raises(ClientError, match="disk full"):  # strict: the client's own error
        simulate(Local(pretrain_epochs=1, local_epochs=1), clients, u, rounds=1)
    with pytest.warns(ClientRejectedWarning, match=r"client 1's .*client reported an error.*disk"):
        result = simulate(
            Local(pretrain_epochs=1, local_epochs=1), clients, u, rounds=1, strict=False
        )
    assert result.records[0]["rejected"][0]["client"] == 1


@pytest.mark.parametrize(
    "faults",
    [
        {"corrupt": 0.5, "corruption": "non_simplex"},
        {"corrupt": 0.5, "corruption": "nan"},
        {"crash": 0.5},
        {"straggler": 0.5},
        {"dropout": 0.5},
        {"byzantine": 0.5},
    ],
)
@pytest.mark.parametrize("strict", [True, False])
def test_injected_faults_neither_raise_nor_warn(faults, strict):
    clients, u = federation(*[Fake() for _ in range(4)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClientRejectedWarning)
        result = simulate(cosmos(), clients, u, rounds=2, seed=3, faults=faults, strict=strict)
    assert len(result.records) == 2
    assert any(r["faults"] for r in result.records) or faults == {"byzantine": 0.5}
    if "corrupt" in faults or "straggler" in faults or "crash" in faults:
        assert any(r["rejected"] for r in result.records)  # still recorded


def test_a_real_failure_beside_injected_faults_still_raises():
    faults = FaultConfig(corrupt=0.5, corruption="non_simplex")
    injector = FaultInjector(faults, list(range(6)), 3)
    hit = [c for c in range(6) if injector.fault(1, c, protocol.PREDICT_PUBLIC)]
    bad = next(c for c in range(6) if c not in hit)  # a client the faults leave alone
    assert hit  # the faults do hit others in round 1
    learners = [Fake(probs=off_simplex) if c == bad else Fake() for c in range(6)]
    clients, u = federation(*learners)
    with pytest.raises(ClientRejectedError, match=f"client {bad}'s reply"):
        simulate(cosmos(), clients, u, rounds=1, seed=3, faults=faults)


def test_mean_accuracy_of_a_model_the_run_did_not_evaluate_names_the_models_it_has():
    clients, u = federation(Fake(), Fake())
    result = simulate(Local(pretrain_epochs=1, local_epochs=1), clients, u, rounds=2)
    with pytest.raises(NotEvaluatedError) as err:
        result.mean_accuracy("cluster_model")
    assert str(err.value) == (
        "this run has no 'cluster_model' accuracies in the last round (algorithm local); "
        "evaluated models: client_model"
    )
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    assert result.models() == ["client_model"]
    assert result.clusters is None
    per_round = result.accuracies()
    assert len(per_round) == 2 and all(set(a) == {0, 1} for a in per_round)
