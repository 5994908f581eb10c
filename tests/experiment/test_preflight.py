"""Checks before round 1 (experiment/preflight.py): each bad input fails before any client
trains, with a message naming the client (or U, or the server model) and the fix; the checks
change nothing a run draws, so its records are the same with or without them."""

import random

import numpy as np
import pytest
import torch
from torch import nn

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.local import Local
from cosmosfl.client import Client
from cosmosfl.experiment import simulate
from cosmosfl.experiment.preflight import PreflightError, check_federation
from cosmosfl.learners.base import Capabilities, Learner, accuracy_metrics
from cosmosfl.learners.torch import TorchLearner

M = 3


class Counting(Learner):
    """A numpy-only learner that counts its fits (none may happen before the checks pass)."""

    num_classes = M
    capabilities = Capabilities(consistency=True)  # preflight asks it check_neighbours

    def __init__(self, num_classes=M, neighbours_error=None):
        self.num_classes = num_classes
        self.neighbours_error = neighbours_error
        self.fits = 0
        self.checked = []

    def fit(self, x, y, *, epochs=1):
        self.fits += 1
        return {"loss": 0.5}

    def predict_proba(self, x):
        return np.full((len(x), self.num_classes), 1 / self.num_classes, np.float32)

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        return {}

    def evaluate(self, x, y):
        return accuracy_metrics(self.predict_proba(x), y)

    def check_neighbours(self, x):
        self.checked.append(np.array(x))
        if self.neighbours_error:
            raise ValueError(self.neighbours_error)


def federation(n=3, features=4, learners=None):
    rng = np.random.default_rng(0)
    learners = learners or [Counting() for _ in range(n)]
    clients = []
    for i, learner in enumerate(learners):
        x = rng.normal(size=(10, features)).astype(np.float32)
        y = np.arange(10) % M
        clients.append(Client(i, learner, (x, y), (x[:5], y[:5])))
    return clients, rng.normal(size=(6, features)).astype(np.float32)


def local():
    return Local(pretrain_epochs=1, local_epochs=1)


def no_fits(clients):
    return all(c.learner.fits == 0 for c in clients)


def test_a_public_set_with_other_features_fails_before_any_client_trains():
    clients, _ = federation(features=36)
    u = np.zeros((6, 24), np.float32)
    with pytest.raises(PreflightError) as err:
        simulate(local(), clients, u, rounds=2)
    assert str(err.value) == (
        "client 0's training inputs have 36 features per sample, U has 24 features per sample: "
        "give every party the same feature columns in the same order"
    )
    assert no_fits(clients)


def test_one_clients_test_or_validation_inputs_of_another_shape_are_named():
    clients, u = federation()
    xt, yt = clients[2].test
    clients[2].test = (np.zeros((5, 1, 2, 2), np.float32), yt)
    with pytest.raises(PreflightError, match=r"client 2's test inputs have samples of shape "):
        simulate(local(), clients, u)
    clients[2].test = (xt, yt)
    clients[1].validation = (np.zeros((3, 5), np.float32), np.zeros(3, int))
    with pytest.raises(PreflightError, match=r"client 1's validation inputs have 5 features"):
        simulate(local(), clients, u)
    assert no_fits(clients)


def test_test_labels_out_of_range_fail_before_round_one():
    clients, u = federation()
    x, y = clients[1].test
    clients[1].test = (x, y + 12)  # labels 12..14 with num_classes 3
    with pytest.raises(PreflightError) as err:
        simulate(local(), clients, u, rounds=1)
    assert str(err.value) == (
        "client 1's test labels lie in [12, 14], but the learners have num_classes = 3 "
        "(labels 0..2): number the classes 0..2 with one mapping for all clients "
        "(or give every learner num_classes = 15)"
    )
    assert no_fits(clients)


def test_negative_one_hot_and_fractional_labels_are_named():
    clients, u = federation()
    x, y = clients[0].train
    for labels, pattern in [
        (y - 1, r"client 0's training labels lie in \[-1, 1\].*class indices start at 0"),
        (np.eye(M)[y], r"client 0's training labels have shape \(10, 3\).*not one-hot"),
        (y + 0.5, r"client 0's training labels have dtype float64 and are not all whole"),
    ]:
        clients[0].train = (x, labels)
        with pytest.raises(PreflightError, match=pattern):
            check_federation(local(), clients, u)
    clients[0].train = (x, y.astype(np.float64))  # whole numbers as floats are labels
    check_federation(local(), clients, u)


def test_learners_that_disagree_on_num_classes_are_named():
    clients, u = federation(learners=[Counting(), Counting(4), Counting()])
    with pytest.raises(PreflightError) as err:
        check_federation(local(), clients, u)
    assert "3 for clients [0, 2]; 4 for clients [1]" in str(err.value)
    assert "give every learner the same num_classes" in str(err.value)


def test_an_empty_or_non_finite_public_set_fails():
    clients, u = federation()
    with pytest.raises(PreflightError, match="the public set U is empty"):
        simulate(local(), clients, u[:0])
    u[2, 1] = np.nan
    u[4, 0] = np.inf
    with pytest.raises(PreflightError, match=r"2 NaN/inf values in 2 of its 6.*must be imputed"):
        simulate(local(), clients, u)
    assert no_fits(clients)


def test_a_cnn_server_model_on_feature_vectors_fails_before_training():
    clients, u = federation(features=36)
    algo = Cosmos(server_model="cnn", target_clusters=1, pretrain_epochs=1)
    with pytest.raises(PreflightError) as err:
        simulate(algo, clients, u, rounds=1)
    text = str(err.value)
    assert text.startswith("server_model 'cnn' cannot take U's inputs of shape (36,): ")
    assert "Use a server_model for feature vectors (" in text and "mlp" in text
    assert "server_learner=" in text
    assert err.value.__cause__ is not None  # the original error is kept
    assert no_fits(clients)


def test_a_server_learner_that_fails_or_has_the_wrong_output_is_named():
    clients, u = federation()

    def broken(sample_shape, num_classes, seed):
        raise RuntimeError(f"no model for {sample_shape}")

    algo = Cosmos(server_learner=broken, target_clusters=1)
    with pytest.raises(PreflightError, match=r"RuntimeError: no model for \(4,\)"):
        check_federation(algo, clients, u)
    algo = Cosmos(server_learner=lambda s, m, seed: Counting(num_classes=m + 1), target_clusters=1)
    with pytest.raises(PreflightError, match=r"probabilities of shape \(2, 4\).*expected \(2, 3\)"):
        check_federation(algo, clients, u)


def test_consistency_with_a_learner_that_cannot_make_neighbours_fails_before_training():
    message = "cannot make neighbours x' for inputs of shape (4,): set lam=0 or augmentation="
    learners = [Counting(), Counting(neighbours_error=message), Counting()]
    clients, u = federation(learners=learners)
    server = Counting()
    algo = Cosmos(server_learner=lambda s, m, seed: server, target_clusters=1, lam=5.0)
    with pytest.raises(PreflightError) as err:
        simulate(algo, clients, u, rounds=1)
    assert str(err.value) == (
        f"client 1 cannot train with the consistency regulariser r_B (lam = 5): {message}"
    )
    assert no_fits(clients)
    np.testing.assert_array_equal(learners[0].checked[0], clients[0].train[0][:2])
    learners[1].neighbours_error = None  # the clients can; now the server model cannot
    server.neighbours_error = "no neighbours for U"
    with pytest.raises(
        PreflightError,
        match=r"^server_model .* cannot train with the consistency regulariser r_B "
        r"\(lam = 5\): no neighbours for U$",
    ):
        check_federation(algo, clients, u)
    np.testing.assert_array_equal(server.checked[-1], u[:2])


def test_without_consistency_neighbours_are_not_checked():
    learners = [Counting(neighbours_error="never asked") for _ in range(2)]
    clients, u = federation(learners=learners)
    algo = Cosmos(server_learner=lambda s, m, seed: Counting(), target_clusters=1, lam=0.0)
    check_federation(algo, clients, u)
    assert all(not lr.checked for lr in learners)


class Probe(Algorithm):
    """Evaluates and nothing else (checks do not need a trained model)."""

    name = "probe"

    def run_round(self, fed, round_num):
        return RoundRecord()


def test_the_checks_leave_every_global_random_state_as_it_was():
    clients, u = federation()
    algo = Cosmos(server_model="mlp", target_clusters=1)
    from cosmosfl.experiment.server_models import provide_server_learner

    provide_server_learner(algo, "cpu")
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    check_federation(algo, clients, u, seed=1)
    assert torch.equal(torch.get_rng_state(), before[0])
    np.testing.assert_array_equal(np.random.get_state()[1], before[1])
    assert random.getstate() == before[2]


def _torch_federation():
    rng = np.random.default_rng(1)
    clients = []
    for i in range(4):
        x = rng.normal(size=(24, 6)).astype(np.float32)
        y = (np.arange(24) + i) % M
        torch.manual_seed(i)
        net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, M))
        learner = TorchLearner(net, num_classes=M, batch_size=8, distill_lr=1e-3, seed=i)
        clients.append(Client(i, learner, (x, y), (x[:8], y[:8])))
    return clients, rng.normal(size=(16, 6)).astype(np.float32)


def _records_without_seconds(result):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in result.records]


def test_records_are_the_same_with_or_without_the_checks(monkeypatch):
    def run():
        clients, u = _torch_federation()
        algo = Cosmos(
            server_model="mlp",
            target_clusters=2,
            lam=1.0,
            pretrain_epochs=1,
            local_epochs=1,
            server_epochs=1,
            distill_epochs=1,
        )
        return _records_without_seconds(simulate(algo, clients, u, rounds=2, seed=2))

    checked = run()
    import cosmosfl.experiment.inprocess as inprocess

    monkeypatch.setattr(inprocess, "check_federation", lambda *a, **k: None)
    assert run() == checked


def test_run_experiment_checks_the_federation_before_the_run_directory(monkeypatch, tmp_path):
    import cosmosfl.experiment.runner as runner
    from cosmosfl.experiment.config import load_config

    seen = []

    def refuse(algorithm, clients, public_x, *, seed):
        seen.append((algorithm.name, len(clients), len(public_x), seed))
        raise PreflightError("refused")

    monkeypatch.setattr(runner, "check_federation", refuse)
    cfg = load_config(
        "configs/default.yaml",
        [
            "threads=1",
            "data.num_clients=4",
            "data.num_groups=2",
            "clients.models={mlp: 1.0}",
            "rounds=1",
            "seed=4",
        ],
    )
    with pytest.raises(PreflightError, match="refused"):
        runner.run_experiment(cfg, tmp_path / "run", progress=False)
    assert seen and seen[0][0] == "cosmos" and seen[0][1] == 4 and seen[0][3] == 4
    assert not (tmp_path / "run").exists()  # nothing written before the checks pass
