"""The parameter-sharing baselines (FedAvg, FedProx, Ditto, FedBABU, FedSelect, pFedCK, pFedHN)
on digits with one client architecture, and their protocol behaviour."""

import itertools

import numpy as np
import pytest
import torch

from cosmosfl import Client, TorchLearner
from cosmosfl.algorithms import ALGORITHMS, ArchitectureMismatch, Ditto, FedAvg, Local
from cosmosfl.core import protocol as P
from cosmosfl.data import load_dataset, paper_split
from cosmosfl.engines import SimulationEngine
from cosmosfl.experiment import SimulationResult
from cosmosfl.models import build_model


class SpyEngine(SimulationEngine):
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
    assert sent and {task for task, _ in sent} == {P.GET_WEIGHTS, P.SET_WEIGHTS}
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for _, a in sent)
    # Chance is 0.1: the clients learned (pFedHN too: its generated weights, not a trained model).
    assert result.mean_accuracy() > 0.3


def iid_split(n_train, n_test, sizes=(40, 70, 100, 130)):
    """Disjoint random (IID) client sets of unequal sizes, so the weighting matters."""
    rng = np.random.default_rng(0)
    order = rng.permutation(n_train)
    bounds = np.cumsum((0, *sizes))
    train = [order[a:b] for a, b in itertools.pairwise(bounds)]
    tests = np.array_split(rng.permutation(n_test)[:200], len(sizes))
    return train, tests, order[bounds[-1] : bounds[-1] + 50]


def test_fedavg_one_epoch_iid_equals_hand_computed_weighted_average():
    split = iid_split
    clients, public_x = federation(4, split=split)
    # Independent copies of the clients as they start (same weights, same random stream).
    twins, _ = federation(4, split=split)
    algo = FedAvg(pretrain_epochs=1, local_epochs=1)
    run(algo, rounds=1, clients=(clients, public_x), engine_cls=SimulationEngine)
    start = {n: t.detach().numpy().copy() for n, t in twins[0].learner.model.state_dict().items()}
    trained, sizes = [], []
    for twin in twins:
        twin.learner.model.load_state_dict({n: torch.from_numpy(a) for n, a in start.items()})
        twin.learner.fit(*twin.train, epochs=1)
        trained.append(
            {
                n: t.detach().numpy().astype(np.float64)
                for n, t in twin.learner.model.state_dict().items()
            }
        )
        sizes.append(len(twin.train[0]))
    assert sizes == [40, 70, 100, 130]
    total = sum(sizes)
    expected = {
        n: sum(s * w[n] for s, w in zip(sizes, trained, strict=True)) / total for n in start
    }
    got = algo.get_state()["global"]["weights"]
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-6)
    # Every client now holds the averaged model.
    for c in clients:
        for name, value in c.learner.get_weights().items():
            np.testing.assert_array_equal(value, got[name])


def personal_weights(clients):
    return [c.learner.get_weights() for c in clients]


def test_ditto_with_lambda_zero_is_local_training():
    ditto, _, ditto_clients = run(Ditto(prox_weight=0.0, **FAST), engine_cls=SimulationEngine)
    local, _, local_clients = run(
        Local(pretrain_epochs=1, local_epochs=1), engine_cls=SimulationEngine
    )
    for rnd in (0, 1):
        assert (
            ditto.records[rnd]["accuracy"]["personal_model"]
            == (local.records[rnd]["accuracy"]["client_model"])
        )
    for a, b in zip(personal_weights(ditto_clients), personal_weights(local_clients), strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    # With λ > 0 the global model does pull the personal models: the comparison can fail.
    _, _, pulled_clients = run(Ditto(prox_weight=1.0, **FAST), engine_cls=SimulationEngine)
    differs = [
        not np.array_equal(a[n], b[n])
        for a, b in zip(
            personal_weights(pulled_clients), personal_weights(local_clients), strict=True
        )
        for n in a
    ]
    assert any(differs)


@pytest.mark.parametrize("name", PARAMETER_ALGORITHMS)
def test_mixing_architectures_is_a_clear_error_naming_the_method(name):
    mixed = federation(4, models=["mlp", "mlp", "cnn", "mlp"])
    with pytest.raises(ArchitectureMismatch, match=rf"{name} exchanges model parameters.*client 2"):
        run(make_algorithm(name), rounds=1, clients=mixed, engine_cls=SimulationEngine)


def test_config_with_mixed_architectures_is_rejected_before_training():
    from cosmosfl.experiment.build import check_clients
    from cosmosfl.experiment.config import ConfigError, config_from_dict

    for models in ({"mlp": 0.5, "cnn": 0.5}, {"logistic_regression": 1.0}):
        cfg = config_from_dict({"clients": {"models": models}, "algorithm": {"name": "ditto"}})
        with pytest.raises(ConfigError, match="algorithm ditto exchanges model parameters"):
            check_clients(cfg)
    ok = config_from_dict({"clients": {"models": {"cnn": 1.0}}, "algorithm": {"name": "ditto"}})
    assert set(check_clients(ok)) == {"cnn"}
    # Model-agnostic algorithms keep accepting mixed federations.
    mixed = config_from_dict({"clients": {"models": {"mlp": 0.5, "cnn": 0.5}}})
    assert set(check_clients(mixed)) == {"mlp", "cnn"}


class CorruptClient(Client):
    """Sends NaN weights from round 2 on: the server must exclude it and carry on."""

    corrupt = False

    def handle(self, message):
        reply = super().handle(message)
        if self.corrupt and message.task == P.GET_WEIGHTS and reply.ok:
            arrays = {n: np.full_like(a, np.nan) for n, a in reply.arrays.items()}
            return P.Reply(reply.task, arrays=arrays, metrics=reply.metrics)
        return reply


@pytest.mark.parametrize("name", ["fedavg", "fedselect", "pfedck", "pfedhn", "ditto"])
def test_bad_weights_are_rejected_and_the_rest_aggregate(name):
    clients, public_x = federation(4)
    bad = clients[3]
    clients[3] = CorruptClient(bad.id, bad.learner, bad.train, bad.test)
    algo = make_algorithm(name)
    engine = SimulationEngine(clients, public_x, seed=0)
    engine.run_round(algo, 1, 2)
    clients[3].corrupt = True
    rec = engine.run_round(algo, 2, 2)
    assert [(r["client"], r["task"]) for r in rec["rejected"]] == [(3, P.GET_WEIGHTS)]
    assert "non-finite" in rec["rejected"][0]["reason"]
    assert rec["participants"] == 3
    for c in clients[:3]:
        assert all(np.isfinite(a).all() for a in c.learner.get_weights().values())


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


@pytest.mark.parametrize("name", PARAMETER_ALGORITHMS)
def test_state_round_trip_continues_like_an_uninterrupted_run(name):
    """get_state after round 1, restored into fresh objects, gives the same round 2."""
    clients, public_x = federation(4)
    algo = make_algorithm(name)
    engine = SimulationEngine(clients, public_x, seed=0)
    engine.run_round(algo, 1, 2)
    algo_state = algo.get_state()
    client_states = [c.get_state() for c in clients]
    expected = engine.run_round(algo, 2, 2)

    fresh, public_x = federation(4)
    for c, state in zip(fresh, client_states, strict=True):
        c.set_state(state)
    resumed = make_algorithm(name)
    resumed.set_state(algo_state)
    got = SimulationEngine(fresh, public_x, seed=0).run_round(resumed, 2, 2)
    assert got["accuracy"] == expected["accuracy"]
    assert got["bytes_up"] == expected["bytes_up"]


def test_dittos_lam_is_a_deprecated_name_of_prox_weight(tmp_path, capsys):
    from cosmosfl.cli.main import main
    from cosmosfl.experiment.config import ConfigError, config_from_dict

    with pytest.warns(DeprecationWarning, match=r"Ditto\(lam=\.\.\.\) is deprecated"):
        ditto = Ditto(lam=0.5)
    assert ditto.prox_weight == 0.5 and "lam" not in ditto.hyperparameters()
    with pytest.warns(DeprecationWarning, match=r"Ditto\.lam is deprecated; use prox_weight"):
        assert ditto.lam == 0.5
    with pytest.warns(DeprecationWarning, match=r"algorithm\.lam of ditto is deprecated"):
        cfg = config_from_dict({"algorithm": {"name": "ditto", "lam": 0.5}})
    assert (
        cfg.algorithm
        == config_from_dict({"algorithm": {"name": "ditto", "prox_weight": 0.5}}).algorithm
    )
    with pytest.raises(ConfigError, match=r"one setting of ditto.*set only algorithm\.prox_weight"):
        config_from_dict({"algorithm": {"name": "ditto", "lam": 0.5, "prox_weight": 1.0}})
    # The command line says so in one line, and the resolved config has the new name only.
    assert main(["show-config", "algorithm.name=ditto", "algorithm.lam=0.5"]) == 0
    out, err = capsys.readouterr()
    assert err == (
        "cosmosfl: warning: algorithm.lam of ditto is deprecated; use algorithm.prox_weight "
        "(same meaning)\n"
    )
    assert "prox_weight: 0.5" in out and "lam:" not in out
