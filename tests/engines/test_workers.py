"""Clients served from worker processes give exactly the serial run's records."""

import numpy as np
import pytest

from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines.workers import WorkerPool
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.runner import run_experiment
from cosmosfl.learners.base import Learner

FAST = [
    "rounds=2",
    "threads=1",
    "data.num_clients=6",
    "clients.models={mlp: 0.5, logistic_regression: 0.5}",
    "algorithm.target_clusters=3",
    "algorithm.pretrain_epochs=3",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
]


def strip(records):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def tiny_federation():
    from cosmosfl import TorchLearner
    from cosmosfl.models import build_model

    rng = np.random.default_rng(0)
    clients = []
    for cid in range(4):
        x = rng.normal(size=(24, 1, 8, 8)).astype(np.float32)
        y = rng.integers(0, 3, 24)
        net = build_model("mlp", in_channels=1, num_classes=3, image_size=8, seed=cid)
        clients.append(Client(cid, TorchLearner(net, seed=cid), (x, y), (x[:8], y[:8])))
    return clients, rng.normal(size=(16, 1, 8, 8)).astype(np.float32)


def test_parallel_clients_equal_serial_and_learners_come_back():
    import torch

    from cosmosfl import Cosmos, simulate

    def run(workers):
        clients, public = tiny_federation()
        algo = Cosmos(
            target_clusters=2,
            server_model="mlp",
            pretrain_epochs=2,
            local_epochs=1,
            server_epochs=1,
            distill_epochs=1,
        )
        return simulate(algo, clients, public, rounds=2, seed=1, workers=workers), clients

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # workers run one thread each; serial must match that
    try:
        (serial, serial_clients), (parallel, parallel_clients) = run(1), run(2)
    finally:
        torch.set_num_threads(threads)
    assert strip(parallel.records) == strip(serial.records)
    # The trained learners were copied back from the workers into the caller's clients.
    for a, b in zip(serial_clients, parallel_clients, strict=True):
        for p, q in zip(a.learner.model.parameters(), b.learner.model.parameters(), strict=True):
            assert torch.equal(p, q)


def test_workers_serve_the_algorithms_client_handlers():
    """Ditto's clients (a proximal term, a second model slot) in worker processes: the
    handlers reach the workers, and the slots come back with the learners."""
    import torch

    from cosmosfl import simulate
    from cosmosfl.algorithms.ditto import Ditto

    def run(workers):
        clients, public = tiny_federation()
        algo = Ditto(pretrain_epochs=1, local_epochs=1)
        return simulate(algo, clients, public, rounds=2, seed=1, workers=workers), clients

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (serial, serial_clients), (parallel, parallel_clients) = run(1), run(2)
    finally:
        torch.set_num_threads(threads)
    assert strip(parallel.records) == strip(serial.records)
    for a, b in zip(serial_clients, parallel_clients, strict=True):
        assert set(b.slots) == {"global"}
        for p, q in zip(
            a.slots["global"].model.parameters(), b.slots["global"].model.parameters(), strict=True
        ):
            assert torch.equal(p, q)


@pytest.mark.slow
def test_parallel_clients_equal_serial_on_a_config():
    serial = run_experiment(load_config("configs/default.yaml", FAST), progress=False)
    parallel = run_experiment(
        load_config("configs/default.yaml", [*FAST, "workers=2"]), progress=False
    )
    assert strip(parallel.records) == strip(serial.records)


class Crash(Learner):
    num_classes = 2

    def fit(self, x, y, *, epochs=1):
        import os

        os._exit(3)  # the worker process dies, as on a segfault or out-of-memory kill

    def predict_proba(self, x):
        return np.full((len(x), 2), 0.5, np.float32)

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        return {}


def test_dead_worker_is_a_clear_error_and_learners_come_back(monkeypatch, request):
    # Crash is this module's: the workers import it by name (tests.engines.test_workers),
    # which needs the repository root on the path they inherit.
    monkeypatch.syspath_prepend(str(request.config.rootpath))
    x, y = np.zeros((4, 1), np.float32), np.array([0, 1, 0, 1])
    clients = [Client(i, Crash(), (x, y), (x, y)) for i in range(2)]
    for c in clients:
        c.public_x = np.zeros((3, 1), np.float32)
    pool = WorkerPool(clients, 2)
    try:
        replies = pool.handle(
            {
                0: protocol.Message(protocol.PREDICT_PUBLIC),
                1: protocol.Message(protocol.PREDICT_PUBLIC),
            }
        )
        assert set(replies) == {0, 1} and replies[0].arrays["probs"].shape == (3, 2)
        assert set(pool.learners()) == {0, 1}
        with pytest.raises(KeyError, match="unknown client 7"):
            pool.handle({7: protocol.Message(protocol.EVALUATE)})
        with pytest.raises(RuntimeError, match="died"):
            pool.handle({0: protocol.Message(protocol.TRAIN_LOCAL)})
    finally:
        pool.close()


def test_workers_must_be_positive():
    with pytest.raises(ConfigError, match="workers"):
        build_experiment(load_config("configs/default.yaml", ["workers=0"]))
