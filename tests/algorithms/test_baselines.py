"""The model-agnostic baselines FedMD, FedCT and COMET on digits: what they share (measured
bytes, the reported model, no parameter task, hyperparameter errors), and the federation and
spy engine their tests use. Each method's own behaviour: test_fedmd.py, test_fedct.py and
test_comet.py; the runs all of them read: the `runs` fixture of conftest.py."""

import numpy as np
import pytest
import torch

from cosmosfl import Client, TorchLearner
from cosmosfl.algorithms import ALGORITHMS, Comet, FedCT, FedMD
from cosmosfl.core import protocol
from cosmosfl.data import load_dataset, paper_split
from cosmosfl.engines import InProcessEngine
from cosmosfl.experiment import SimulationResult
from cosmosfl.models import build_model

M = 10  # digits classes


class SpyEngine(InProcessEngine):
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
        assert not tasks & protocol.PARAMETER_TASKS, name
        for _, _, _, _, arrays in traffic:
            assert all(a.shape in ((n, M), (n,)) for a in arrays.values()), name


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
