"""Model selection on the validation slice (select_on_validation) and the slice itself."""

import numpy as np
import pytest

from cosmosfl import Client, Cosmos, TorchLearner
from cosmosfl.algorithms.base import DeferredMetrics
from cosmosfl.algorithms.selection import select_on_validation
from cosmosfl.core import protocol
from cosmosfl.engines import InProcessEngine
from cosmosfl.experiment.build import validation_holdout
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.server_models import provide_server_learner
from cosmosfl.models.registry import build_model

from .test_cosmos import small_federation


class FixedFederation:
    """Answers validation measurements with given accuracies, deferred or not."""

    def __init__(self, h_val, own_val, deferred=False):
        self.h_val, self.own_val, self.deferred = h_val, own_val, deferred
        self.sent = []
        self.reads = 0  # deferred measurements read so far

    def _wrap(self, metrics):
        def read():
            self.reads += 1
            return metrics

        return DeferredMetrics(read) if self.deferred else metrics

    def evaluate_server_models(self, models, split="test"):
        assert split == "validation"
        return self._wrap({c: {"top1": self.h_val[c]} for c in models if c in self.h_val})

    def send(self, messages, expect=None):
        self.sent += [(c, m.task, dict(m.config)) for c, m in messages.items()]
        return {
            c: protocol.Reply(protocol.EVALUATE, metrics={"top1": self.own_val[c]})
            for c in messages
            if c in self.own_val
        }


@pytest.mark.parametrize("deferred", [False, True])
def test_each_client_keeps_the_model_better_on_its_validation_slice(deferred):
    h_test = {0: {"top1": 0.9}, 1: {"top1": 0.8}, 2: {"top1": 0.7}, 3: {"top1": 0.6}}
    own_test = {0: {"top1": 0.5}, 1: {"top1": 0.95}, 2: {"top1": 0.1}, 3: {"top1": 0.2}}
    # client 0: h better; 1: own better; 2: a tie goes to h_π(i); 3: no validation answer
    fed = FixedFederation({0: 0.7, 1: 0.4, 2: 0.5, 3: 0.9}, {0: 0.6, 1: 0.8, 2: 0.5})
    fed.deferred = deferred
    models = dict.fromkeys(range(4), object())
    chosen = select_on_validation(fed, models, h_test, own_test)
    assert fed.reads == 0  # nothing is read before the choice is (Flower: no round trip)
    assert dict(chosen.items()) == {
        0: {"top1": 0.9, "chose_cluster_model": 1.0},
        1: {"top1": 0.95, "chose_cluster_model": 0.0},
        2: {"top1": 0.7, "chose_cluster_model": 1.0},
    }
    assert fed.reads == (1 if deferred else 0)
    # The clients measure their own model on the validation split, never the test split.
    assert {cfg.get("split") for _, task, cfg in fed.sent if task == protocol.EVALUATE} == {
        "validation"
    }


def test_cosmos_records_the_selected_model_and_the_choice():
    clients, public_x, _ = small_federation()
    for c in clients:  # hold out a fifth of each client's training data
        x, y = c.train
        tr, va = validation_holdout(np.arange(len(y)), 0.2, seed=c.id)
        c.train, c.validation = (x[tr], y[tr]), (x[va], y[va])
    algo = Cosmos(
        select_on_validation=True,
        server_model="mlp",
        pretrain_epochs=1,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
    )
    engine = InProcessEngine(clients, public_x, seed=0)
    provide_server_learner(algo, engine.device)
    record = engine.run_round(algo, 1, 1)
    acc, choice = record["accuracy"], record["selection"]
    assert set(acc["selected"]) == set(acc["cluster_model"])
    for cid, picked in acc["selected"].items():
        source = "cluster_model" if choice[cid]["chose_cluster_model"] else "local"
        assert picked == acc[source][cid]


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ConfigError, match=r"data\.validation_fraction"):
        load_config(None, ["algorithm.select_on_validation=true", "data.validation_fraction=0"])
    with pytest.raises(ConfigError, match=r"validation_fraction = 1\.0"):
        load_config(None, ["data.validation_fraction=1.0"])
    net = build_model("mlp", in_channels=1, num_classes=10, image_size=8, seed=0)
    x, y = np.zeros((4, 1, 8, 8), np.float32), np.arange(4)
    client = Client(0, TorchLearner(net, seed=0), (x, y), (x, y))
    with pytest.raises(ValueError, match="no validation slice"):
        client.split("validation")
    reply = client.handle(protocol.Message(protocol.EVALUATE, {"split": "validation"}))
    assert "no validation slice" in (reply.error or "")
