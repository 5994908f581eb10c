"""A new baseline is its own files: an algorithm, its typed requests and its client handlers.

The toy baseline below ("sharpen") is written entirely in this file, with no edit to
client.py, learners/torch.py or any engine: clients train with a confidence penalty (an extra
loss term on TorchLearner.fit), send sharpened predictions on U (p^γ renormalised, computed on
the client), and distill to the server's average of them with the model-agnostic handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.core.tasks import Distill, MetricsReply, ProbsReply, Request, always_sent
from cosmosfl.data import load_dataset, paper_split
from cosmosfl.engines import InProcessEngine
from cosmosfl.handlers import ClientHandlers
from cosmosfl.handlers.default import HANDLERS as MODEL_AGNOSTIC
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models import build_model

# -- the toy baseline: requests, client handlers, algorithm ------------------------- (start)


@dataclass(frozen=True)
class ConfidentTrain(Request):
    """train_local with a confidence penalty: cross-entropy − β·H(p) on each batch."""

    task: ClassVar[str] = protocol.TRAIN_LOCAL
    epochs: int = always_sent(1)
    beta: float = always_sent(0.1)


@dataclass(frozen=True)
class SharpPredict(Request):
    """predict_public, each row raised to the power `gamma` and renormalised by the client."""

    task: ClassVar[str] = protocol.PREDICT_PUBLIC
    gamma: float = always_sent(2.0)


SHARPEN_HANDLERS = ClientHandlers("sharpen", base=MODEL_AGNOSTIC)  # + distill, evaluate


@SHARPEN_HANDLERS.handles(ConfidentTrain)
def confident_train(client: Client, request: ConfidentTrain) -> MetricsReply:
    def penalty(xb: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        p = F.softmax(logits, dim=1)
        return request.beta * (p * torch.log(p.clamp_min(1e-12))).sum(dim=1).mean()

    x, y = client.train
    assert isinstance(client.learner, TorchLearner)
    return MetricsReply(client.learner.fit(x, y, epochs=request.epochs, extra_losses=[penalty]))


@SHARPEN_HANDLERS.handles(SharpPredict)
def sharp_predict(client: Client, request: SharpPredict) -> ProbsReply:
    p = client.learner.predict_proba(client.public()).astype(np.float64) ** request.gamma
    return ProbsReply((p / p.sum(axis=1, keepdims=True)).astype(np.float32))


@dataclass
class Sharpen(Algorithm):
    name: ClassVar[str] = "sharpen"
    client_handlers: ClassVar[ClientHandlers] = SHARPEN_HANDLERS

    epochs: int = 1
    beta: float = 0.1
    gamma: float = 2.0

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        with fed.phase("local_training"):
            fed.send(dict.fromkeys(fed.client_ids, ConfidentTrain(self.epochs, self.beta)))
        with fed.phase("prediction"):
            replies = fed.send(dict.fromkeys(fed.client_ids, SharpPredict(self.gamma)))
            consensus = np.mean([r.arrays["probs"] for r in replies.values()], axis=0)
        with fed.phase("client_distillation"):
            fed.send(dict.fromkeys(replies, Distill(consensus, epochs=self.epochs)))
        with fed.phase("evaluation"):
            record.add_metrics("client_model", evaluate_clients(fed))
        record.info["consensus_max"] = float(consensus.max(axis=1).mean())
        return record


# -- the toy baseline ------------------------------------------------------------------ (end)


def federation(num_clients: int = 4) -> tuple[list[Client], np.ndarray]:
    ds = load_dataset("digits")
    part = paper_split(ds.y_train, ds.y_test, num_clients, seed=0, num_groups=2)
    x = ds.x_train.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    xt = ds.x_test.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    clients = []
    for i in range(num_clients):
        net = build_model("mlp", in_channels=1, num_classes=10, image_size=8, seed=i, width=0.5)
        tr, te = part.client_train[i], part.client_test[i]
        clients.append(
            Client(i, TorchLearner(net, seed=i), (x[tr], ds.y_train[tr]), (xt[te], ds.y_test[te]))
        )
    return clients, x[part.public]


def test_a_baseline_defined_outside_the_package_runs_on_the_in_process_engine():
    clients, public_x = federation()
    records = InProcessEngine(clients, public_x, seed=0).run(Sharpen(), rounds=2)
    assert [r["round"] for r in records] == [1, 2]
    for record in records:
        assert set(record["accuracy"]["client_model"]) == {"0", "1", "2", "3"}
        assert record["rejected"] == []
        n, m = len(public_x), 10  # one float32 (n, m) matrix up per client, one down
        assert record["bytes_up"] == dict.fromkeys(("0", "1", "2", "3"), n * m * 4)
    assert 0.1 <= records[-1]["consensus_max"] <= 1.0
    # Same seed, same records (timings aside).
    again, _ = federation()
    repeat = InProcessEngine(again, public_x, seed=0).run(Sharpen(), rounds=2)
    for a, b in zip(records, repeat, strict=True):
        assert {k: v for k, v in a.items() if k != "seconds"} == {
            k: v for k, v in b.items() if k != "seconds"
        }


def test_the_toy_handlers_change_what_clients_do():
    """The confidence penalty reaches TorchLearner.fit, and γ reaches the prediction."""
    (client, *_), public_x = federation()
    client.public_x, client.handlers = public_x, SHARPEN_HANDLERS
    plain = client.learner.predict_proba(public_x)
    sharp = client.handle(SharpPredict(3.0).to_message()).arrays["probs"]
    assert (sharp.max(axis=1) >= plain.max(axis=1) - 1e-6).all()
    assert not np.allclose(sharp, plain)
    penalised, free = federation()[0][0], federation()[0][0]
    penalised.handlers = SHARPEN_HANDLERS
    penalised.handle(ConfidentTrain(2, beta=5.0).to_message())
    free.handle(protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 2}))
    entropy = [  # mean predictive entropy on the client's own test split
        float(-(p * np.log(np.clip(p, 1e-12, 1))).sum(axis=1).mean())
        for p in (c.learner.predict_proba(c.test[0]) for c in (penalised, free))
    ]
    assert entropy[0] > entropy[1]  # the penalty keeps predictions less confident
    # Another algorithm's handlers do not know the toy's settings: a clear error.
    refused = free.handle(ConfidentTrain(1).to_message())
    assert not refused.ok and "has no setting(s) beta" in refused.error


def test_the_toy_tasks_travel_through_the_flower_codec():
    codec = pytest.importorskip("cosmosfl.engines.flower.codec")
    (client, *_), public_x = federation()
    client.public_x, client.handlers = public_x, SHARPEN_HANDLERS
    targets = np.full((len(public_x), 10), 0.1, np.float32)
    requests = [ConfidentTrain(1, 0.5), SharpPredict(2.0), Distill(targets, epochs=1)]
    batch = codec.Batch([r.to_message() for r in requests], round_num=1)
    items = codec.decode_batch(codec.encode_batch(batch)).items
    assert [(i.task, dict(i.config)) for i in items] == [(r.task, r.config) for r in requests]
    replies = [codec.ItemReply(codec.PROTOCOL, client.handle(item)) for item in items]
    pid, back = codec.decode_replies(codec.encode_replies(client.id, replies))
    assert pid == client.id and all(r.reply.ok for r in back)
    assert back[1].reply.arrays["probs"].shape == (len(public_x), 10)
