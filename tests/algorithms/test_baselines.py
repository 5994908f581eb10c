"""The model-agnostic baselines FedMD, FedCT and COMET on digits, and their protocol behaviour."""

import numpy as np
import pytest
import torch

from cosmosfl import Client, TorchLearner
from cosmosfl.algorithms import ALGORITHMS, Comet, FedCT, FedMD, majority_vote
from cosmosfl.core import protocol as P
from cosmosfl.data import load_dataset, paper_split
from cosmosfl.engines import SimulationEngine
from cosmosfl.experiment import SimulationResult
from cosmosfl.models import build_model

M = 10  # digits classes


class SpyEngine(SimulationEngine):
    """The simulation engine, recording every message and reply that crosses the boundary."""

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


def digits_federation(num_clients=10, seed=0):
    """Ten `mlp` clients on the paper split of digits: 2 consecutive ids per class group."""
    ds = load_dataset("digits")
    part = paper_split(ds.y_train, ds.y_test, num_clients, seed=seed)
    x = ds.x_train.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    xt = ds.x_test.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    clients = []
    for i in range(num_clients):
        tr, te = part.client_train[i], part.client_test[i]
        net = build_model("mlp", in_channels=1, num_classes=M, image_size=8, seed=i)
        learner = TorchLearner(net, seed=i, distill_lr=1e-3)
        clients.append(Client(i, learner, (x[tr], ds.y_train[tr]), (xt[te], ds.y_test[te])))
    return clients, x[part.public], part


def run(algo, rounds=2):
    clients, public_x, part = digits_federation()
    engine = SpyEngine(clients, public_x, seed=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        result = SimulationResult(algo.name, algo.primary_model, engine.run(algo, rounds))
    return result, engine.traffic, len(public_x), part


FAST = {"pretrain_epochs": 2, "local_epochs": 1}


@pytest.fixture(scope="module")
def runs():
    return {
        "fedmd": run(FedMD(**FAST, distill_epochs=1)),
        "fedct": run(FedCT(**FAST)),
        # Enough pre-training for the pseudo-labels of the 5 class groups to separate.
        "comet": run(Comet(num_clusters=5, pretrain_epochs=10, local_epochs=1, distill_epochs=1)),
    }


@pytest.mark.parametrize(
    ("name", "itemsize_per_sample"), [("fedmd", M * 4), ("fedct", 1), ("comet", M * 4)]
)
def test_two_rounds_report_client_model_and_measured_bytes(runs, name, itemsize_per_sample):
    result, _, n, _ = runs[name]
    assert len(result.records) == 2
    for rec in result.records:
        assert rec["primary_model"] == "client_model"
        assert set(rec["accuracy"]["client_model"]) == {str(i) for i in range(10)}
        # FedMD/COMET: float32 soft labels |U|·M·4; FedCT: uint8 hard labels |U|·1, each way.
        assert set(rec["bytes_up"].values()) == {n * itemsize_per_sample}
        assert set(rec["bytes_down"].values()) == {n * itemsize_per_sample}
        assert rec["rejected"] == []
    assert result.mean_accuracy() > 0.5  # the clients learned


def test_no_baseline_sends_parameter_tasks(runs):
    for name, (_, traffic, n, _) in runs.items():
        assert ALGORITHMS[name].model_agnostic
        tasks = {task for _, _, _, task, _ in traffic}
        assert not tasks & P.PARAMETER_TASKS, name
        for _, _, _, _, arrays in traffic:
            assert all(a.shape in ((n, M), (n,)) for a in arrays.values()), name


def test_fedct_only_integer_labels_cross_the_wire(runs):
    _, traffic, n, _ = runs["fedct"]
    arrays = [(d, task, a) for _, d, _, task, msg in traffic for a in msg.values()]
    assert {d for d, _, _ in arrays} == {"up", "down"}
    for direction, task, a in arrays:
        assert np.issubdtype(a.dtype, np.unsignedinteger), (direction, task, a.dtype)
        assert a.dtype == np.uint8 and a.shape == (n,), (direction, task, a.shape)
    # Every client trains on U labelled by the same consensus (the vote of the same round).
    for t in (1, 2):
        sent = [
            msg["public_labels"]
            for r, d, _, task, msg in traffic
            if r == t and d == "down" and task == P.TRAIN_LOCAL and msg
        ]
        assert len(sent) == 10 and all(np.array_equal(sent[0], s) for s in sent)
        votes = [msg["labels"] for r, d, _, _, msg in traffic if r == t and d == "up" and msg]
        np.testing.assert_array_equal(sent[0], majority_vote(votes, M))


def test_majority_vote_breaks_ties_to_the_lowest_class():
    votes = [
        np.array([0, 1, 2, 3, 4], dtype=np.uint8),
        np.array([0, 2, 2, 1, 3], dtype=np.uint8),
        np.array([1, 2, 0, 1, 2], dtype=np.uint8),
        np.array([1, 1, 0, 3, 1], dtype=np.uint8),
    ]
    # sample 0: 0,0,1,1 tie -> 0; 1: 1,2,2,1 tie -> 1; 2: 2,2,0,0 tie -> 0;
    # sample 3: 3,1,1,3 tie -> 1; sample 4: 4,3,2,1 four-way tie -> 1.
    np.testing.assert_array_equal(majority_vote(votes, 5), [0, 1, 0, 1, 1])
    np.testing.assert_array_equal(majority_vote(votes[:3], 5), [0, 2, 2, 1, 2])
    np.testing.assert_array_equal(majority_vote([np.array([7, 0])], 8), [7, 0])
    with pytest.raises(ValueError, match="lie in"):
        majority_vote([np.array([5])], 5)
    with pytest.raises(ValueError, match="without any"):
        majority_vote([], 5)


def test_fedmd_sends_one_consensus_to_every_client(runs):
    _, traffic, n, _ = runs["fedmd"]
    for t in (1, 2):
        targets = [
            msg["targets"]
            for r, d, _, task, msg in traffic
            if r == t and d == "down" and task == P.DISTILL
        ]
        assert len(targets) == 10 and targets[0].shape == (n, M)
        assert all(np.array_equal(targets[0], x) for x in targets)
        probs = [msg["probs"] for r, d, _, _, msg in traffic if r == t and d == "up" and msg]
        np.testing.assert_allclose(targets[0], np.mean(probs, axis=0), atol=1e-6)


def test_comet_recovers_the_five_class_groups(runs):
    result, _, _, part = runs["comet"]
    for rec in result.records:  # re-clustered every round
        assert rec["K"] == 5 and rec["threshold"] is None
        found = {int(c): k for c, k in rec["clusters"].items()}
        truth = {i: int(g) for i, g in enumerate(part.client_group)}
        # The same partition of clients (cluster numbers may differ from group numbers).
        pairs = {(found[c], truth[c]) for c in truth}
        assert len(pairs) == 5, sorted(pairs)
        # Clusters are numbered by their smallest member: 2 consecutive ids per group.
        assert [found[c] for c in range(10)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert set(result.records[-1]["accuracy"]) == {"local", "client_model"}
    assert result.clusters is not None


def test_comet_caps_k_at_the_number_of_clients():
    clients, public_x, _ = digits_federation(num_clients=5)
    engine = SimulationEngine(clients[:3], public_x, seed=0)
    algo = Comet(num_clusters=5, pretrain_epochs=1, distill_epochs=1)
    rec = SimulationResult(algo.name, algo.primary_model, engine.run(algo, rounds=1))
    assert rec.records[0]["K"] == 3 and len(set(rec.clusters.values())) == 3


@pytest.mark.parametrize(
    ("cls", "field", "value"),
    [
        (FedMD, "pretrain_epochs", -1),
        (FedMD, "distill_epochs", 1.5),
        (FedMD, "aggregation", "mode"),
        (FedMD, "temperature", -0.5),
        (FedMD, "lam", -1.0),
        (FedCT, "local_epochs", -2),
        (FedCT, "pretrain_epochs", -1),
        (Comet, "num_clusters", 0),
        (Comet, "local_epochs", -1),
        (Comet, "aggregation", "vote"),
        (Comet, "trim_fraction", 0.5),
        (Comet, "temperature", float("nan")),
    ],
)
def test_invalid_hyperparameters_name_the_field(cls, field, value):
    with pytest.raises(ValueError, match=field):
        cls(**{field: value})
