"""The parameter-sharing baselines (FedAvg, FedProx, Ditto, FedBABU, FedSelect, pFedCK, pFedHN)
on digits with one client architecture: the protocol behaviour they share, and the federation
their tests use (FedAvg's and Ditto's own tests: test_fedavg.py, test_ditto.py)."""

import numpy as np
import pytest
import torch

from cosmosfl import Client, TorchLearner
from cosmosfl.algorithms import ALGORITHMS, ArchitectureMismatch
from cosmosfl.core import protocol
from cosmosfl.data import load_dataset, paper_split
from cosmosfl.engines import InProcessEngine
from cosmosfl.experiment import SimulationResult
from cosmosfl.models import build_model


class SpyEngine(InProcessEngine):
    """The simulation engine, recording every array that crosses the boundary."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.traffic = []  # (round, direction, client, task, arrays)

    def send(self, messages, expect=None):
        replies = super().send(messages, expect)
        for cid, m in messages.items():
            self.traffic.append((self._round, "down", cid, m.task, dict(m.arrays)))
        for cid, r in replies.items():
            self.traffic.append((self._round, "up", cid, r.task, dict(r.arrays)))
        return replies


M = 10
PARAMETER_ALGORITHMS = ["fedavg", "fedprox", "ditto", "fedbabu", "fedselect", "pfedck", "pfedhn"]
FAST = {"pretrain_epochs": 1, "local_epochs": 1}
EXTRA = {"fedbabu": {"finetune_epochs": 1}, "pfedck": {"num_clusters": 3}}


def make_algorithm(name, **overrides):
    return ALGORITHMS[name](**{**FAST, **EXTRA.get(name, {}), **overrides})


def federation(num_clients=6, models=None, seed=0, split=None):
    """Digits clients, each an `mlp` unless `models` names another architecture per client."""
    ds = load_dataset("digits")
    x = ds.x_train.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    xt = ds.x_test.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    if split is None:
        part = paper_split(ds.y_train, ds.y_test, num_clients, seed=seed, num_groups=3)
        train, test, public = part.client_train, part.client_test, part.public
    else:
        train, test, public = split(len(x), len(xt))
    clients = []
    for i in range(num_clients):
        name = "mlp" if models is None else models[i]
        net = build_model(name, in_channels=1, num_classes=M, image_size=8, seed=i, width=0.5)
        learner = TorchLearner(net, seed=i)
        tr, te = train[i], test[i]
        clients.append(Client(i, learner, (x[tr], ds.y_train[tr]), (xt[te], ds.y_test[te])))
    return clients, x[public]


def model_bytes(client):
    return sum(t.numel() * 4 for t in client.learner.model.state_dict().values())


def run(algo, rounds=2, clients=None, engine_cls=SpyEngine, **engine_kwargs):
    if clients is None:
        clients, public_x = federation()
    else:
        clients, public_x = clients
    engine = engine_cls(clients, public_x, seed=0, **engine_kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        result = SimulationResult(algo.name, algo.primary_model, engine.run(algo, rounds))
    return result, engine, clients


@pytest.fixture(scope="module")
def runs():
    return {name: run(make_algorithm(name), clients=federation(4)) for name in PARAMETER_ALGORITHMS}


@pytest.mark.parametrize("name", PARAMETER_ALGORITHMS)
def test_two_rounds_on_digits_with_counted_parameter_bytes(runs, name):
    result, engine, clients = runs[name]
    algo = ALGORITHMS[name]
    assert not algo.model_agnostic
    assert len(result.records) == 2
    size = model_bytes(clients[0])  # 4 bytes per float32 entry of the mlp
    for rec in result.records:
        assert rec["primary_model"] == algo.primary_model
        assert set(rec["accuracy"][algo.primary_model]) == {str(c.id) for c in clients}
        assert rec["rejected"] == []
    # Round 1 also uploads every client's initial weights (the architecture check).
    assert set(result.records[0]["bytes_up"].values()) == {2 * size}
    # Later rounds: exactly one model each way per client, measured from the payloads.
    assert set(result.records[1]["bytes_up"].values()) == {size}
    assert set(result.records[1]["bytes_down"].values()) == {size}
    sent = [(task, a) for _, _, _, task, arrays in engine.traffic for a in arrays.values()]
    assert sent and {task for task, _ in sent} == {protocol.GET_WEIGHTS, protocol.SET_WEIGHTS}
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for _, a in sent)
    # Chance is 0.1: the clients learned (pFedHN too: its generated weights, not a trained model).
    assert result.mean_accuracy() > 0.3


@pytest.mark.parametrize("name", PARAMETER_ALGORITHMS)
def test_mixing_architectures_is_a_clear_error_naming_the_method(name):
    mixed = federation(4, models=["mlp", "mlp", "cnn", "mlp"])
    with pytest.raises(ArchitectureMismatch, match=rf"{name} exchanges model parameters.*client 2"):
        run(make_algorithm(name), rounds=1, clients=mixed, engine_cls=InProcessEngine)


class CorruptClient(Client):
    """Sends NaN weights from round 2 on: the server must exclude it and carry on."""

    corrupt = False

    def handle(self, message):
        reply = super().handle(message)
        if self.corrupt and message.task == protocol.GET_WEIGHTS and reply.ok:
            arrays = {n: np.full_like(a, np.nan) for n, a in reply.arrays.items()}
            return protocol.Reply(reply.task, arrays=arrays, metrics=reply.metrics)
        return reply


@pytest.mark.parametrize("name", ["fedavg", "fedselect", "pfedck", "pfedhn", "ditto"])
def test_bad_weights_are_rejected_and_the_rest_aggregate(name):
    clients, public_x = federation(4)
    bad = clients[3]
    clients[3] = CorruptClient(bad.id, bad.learner, bad.train, bad.test)
    algo = make_algorithm(name)
    engine = InProcessEngine(clients, public_x, seed=0)
    engine.run_round(algo, 1, 2)
    clients[3].corrupt = True
    rec = engine.run_round(algo, 2, 2)
    assert [(r["client"], r["task"]) for r in rec["rejected"]] == [(3, protocol.GET_WEIGHTS)]
    assert "non-finite" in rec["rejected"][0]["reason"]
    assert rec["participants"] == 3
    for c in clients[:3]:
        assert all(np.isfinite(a).all() for a in c.learner.get_weights().values())


@pytest.mark.parametrize("name", PARAMETER_ALGORITHMS)
def test_state_round_trip_continues_like_an_uninterrupted_run(name):
    """get_state after round 1, restored into fresh objects, gives the same round 2."""
    clients, public_x = federation(4)
    algo = make_algorithm(name)
    engine = InProcessEngine(clients, public_x, seed=0)
    engine.run_round(algo, 1, 2)
    algo_state = algo.get_state()
    client_states = [c.get_state() for c in clients]
    expected = engine.run_round(algo, 2, 2)

    fresh, public_x = federation(4)
    for c, state in zip(fresh, client_states, strict=True):
        c.set_state(state)
    resumed = make_algorithm(name)
    resumed.set_state(algo_state)
    got = InProcessEngine(fresh, public_x, seed=0).run_round(resumed, 2, 2)
    assert got["accuracy"] == expected["accuracy"]
    assert got["bytes_up"] == expected["bytes_up"]
