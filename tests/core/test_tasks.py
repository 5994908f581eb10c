"""Typed task requests and replies: each travels as exactly the message it replaced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from cosmosfl.algorithms.ditto import GLOBAL_SLOT, DittoTrain
from cosmosfl.algorithms.fedbabu import PERSONAL_SLOT, BabuTrain
from cosmosfl.algorithms.fedct import ConsensusTrain, PredictLabels
from cosmosfl.algorithms.fedprox import ProxTrain
from cosmosfl.algorithms.pfedck import INTERACTIVE_SLOT, MutualTrain
from cosmosfl.algorithms.pfedhn import HNTrain
from cosmosfl.core import protocol
from cosmosfl.core.tasks import (
    OWN_MODEL,
    Distill,
    Evaluate,
    GetWeights,
    LabelsReply,
    MetricsReply,
    PredictPublic,
    ProbsReply,
    Request,
    SetWeights,
    TrainLocal,
    WeightsReply,
    always_sent,
    as_message,
)

PROBS = np.full((4, 3), 1 / 3, np.float32)
CONTEXT = {"n": 4, "m": 3}
KD = {"kd_weight": 1.0, "kd_temperature": 1.0}

# (typed request, the (task, config) the dict-keyed code sent before), config order included.
WIRE = [
    (TrainLocal(3), (protocol.TRAIN_LOCAL, {"epochs": 3})),
    (TrainLocal(), (protocol.TRAIN_LOCAL, {"epochs": 1})),
    (PredictPublic(), (protocol.PREDICT_PUBLIC, {})),
    (PredictPublic("uint8"), (protocol.PREDICT_PUBLIC, {"codec": "uint8"})),
    (Evaluate(), (protocol.EVALUATE, {})),
    (Evaluate("validation"), (protocol.EVALUATE, {"split": "validation"})),
    (Evaluate(slot=PERSONAL_SLOT), (protocol.EVALUATE, {"slot": "personal"})),
    (GetWeights(), (protocol.GET_WEIGHTS, {})),
    (GetWeights(GLOBAL_SLOT), (protocol.GET_WEIGHTS, {"slot": "global"})),
    (Distill(PROBS, epochs=2, lam=0.0), (protocol.DISTILL, {"epochs": 2, "lam": 0.0})),
    (
        Distill(PROBS, epochs=2, lam=5.0, client_weights="uniform"),
        (protocol.DISTILL, {"epochs": 2, "lam": 5.0, "client_weights": "uniform"}),
    ),
    (ProxTrain(5, 0.0), (protocol.TRAIN_LOCAL, {"epochs": 5, "prox_mu": 0.0})),
    (
        DittoTrain(5, prox_mu=1.0, prox_to=GLOBAL_SLOT),
        (protocol.TRAIN_LOCAL, {"epochs": 5, "prox_mu": 1.0, "prox_to": "global"}),
    ),
    (DittoTrain(5), (protocol.TRAIN_LOCAL, {"epochs": 5})),
    (DittoTrain(5, slot=GLOBAL_SLOT), (protocol.TRAIN_LOCAL, {"epochs": 5, "slot": "global"})),
    (BabuTrain(5, freeze="head"), (protocol.TRAIN_LOCAL, {"epochs": 5, "freeze": "head"})),
    (
        BabuTrain(5, slot=PERSONAL_SLOT, init_from=OWN_MODEL, freeze="body"),
        (
            protocol.TRAIN_LOCAL,
            {"epochs": 5, "slot": "personal", "init_from": "", "freeze": "body"},
        ),
    ),
    (
        MutualTrain(5, slot=INTERACTIVE_SLOT, distill_from=OWN_MODEL, **KD),
        (protocol.TRAIN_LOCAL, {"epochs": 5, "slot": "interactive", "distill_from": "", **KD}),
    ),
    (
        MutualTrain(5, distill_from=INTERACTIVE_SLOT, **KD),
        (protocol.TRAIN_LOCAL, {"epochs": 5, "distill_from": "interactive", **KD}),
    ),
    (HNTrain(5), (protocol.TRAIN_LOCAL, {"epochs": 5})),
    (
        HNTrain(epochs=0, recalibrate_bn=True),
        (protocol.TRAIN_LOCAL, {"epochs": 0, "recalibrate_bn": True}),
    ),
    (PredictLabels(), (protocol.PREDICT_PUBLIC, {"hard": True})),
]


@pytest.mark.parametrize("request_, wire", WIRE, ids=[type(r).__name__ for r, _ in WIRE])
def test_a_typed_request_travels_as_the_dict_it_replaced_and_reads_back(request_, wire):
    task, config = wire
    message = as_message(request_)
    assert message.task == task
    assert list(message.config.items()) == list(config.items())  # key order too
    assert [type(v) for v in message.config.values()] == [type(v) for v in config.values()]
    back = type(request_).from_message(message, CONTEXT)
    assert back.config == request_.config and back.arrays.keys() == request_.arrays.keys()
    assert as_message(message) is message


def test_arrays_travel_under_their_names_and_are_validated_on_receipt():
    labels = np.array([0, 1, 2, 0], np.uint8)
    message = ConsensusTrain(2, public_labels=labels).to_message()
    assert message.config == {"epochs": 2} and message.arrays["public_labels"] is labels
    assert ConsensusTrain.from_message(message, CONTEXT).public_labels is labels
    bad = protocol.Message(protocol.TRAIN_LOCAL, {}, {"public_labels": np.array([0, 1, 7, 0])})
    with pytest.raises(protocol.PayloadError, match=r"\[0, 3\)"):
        ConsensusTrain.from_message(bad, CONTEXT)
    with pytest.raises(protocol.PayloadError, match="unexpected arrays"):
        TrainLocal.from_message(message, CONTEXT)


def test_unknown_settings_and_missing_arrays_are_refused():
    with pytest.raises(ValueError, match=r"has no setting.*slot.*it takes: epochs"):
        TrainLocal.from_message(protocol.Message(protocol.TRAIN_LOCAL, {"slot": "global"}), CONTEXT)
    with pytest.raises(ValueError, match="distill request carries no 'targets'"):
        Distill.from_message(protocol.Message(protocol.DISTILL, {"epochs": 1}), CONTEXT)
    with pytest.raises(ValueError, match="is not a TrainLocal"):
        TrainLocal.from_message(protocol.Message(protocol.EVALUATE), CONTEXT)
    # A missing scalar takes the field's default; values take the field's type.
    read = Distill.from_message(
        protocol.Message(protocol.DISTILL, {"lam": 5}, {"targets": PROBS}), CONTEXT
    )
    assert (read.epochs, read.lam, type(read.lam)) == (1, 5.0, float)


def test_encoded_distillation_targets_decode_on_receipt():
    targets = np.random.default_rng(0).dirichlet(np.ones(3), size=4).astype(np.float32)
    message = Distill(targets, epochs=1, lam=0.0, codec="uint8").to_message()
    assert "codec" not in message.config and set(message.arrays) == {"targets.uint8"}
    read = Distill.from_message(message, CONTEXT)
    np.testing.assert_allclose(read.targets, targets, atol=1 / 255)


def test_weights_requests_and_replies():
    w = {"a": np.ones((2, 2), np.float32), "b": np.zeros(3, np.float32)}
    message = SetWeights(w, GLOBAL_SLOT).to_message()
    assert message.config == {"slot": "global"} and list(message.arrays) == ["a", "b"]
    read = SetWeights.from_message(message, CONTEXT)
    assert read.slot == GLOBAL_SLOT and read.weights.keys() == w.keys()
    assert SetWeights(w).to_message().config == {}
    reply = WeightsReply(w, num_samples=48).to_reply(protocol.GET_WEIGHTS)
    assert reply.metrics == {"num_samples": 48.0} and reply.arrays.keys() == w.keys()
    back = WeightsReply.from_reply(reply)
    assert back.num_samples == 48.0 and back.weights.keys() == w.keys()


def test_replies_take_their_wire_form():
    assert MetricsReply({"loss": 0.5}).to_reply(protocol.TRAIN_LOCAL) == protocol.Reply(
        protocol.TRAIN_LOCAL, metrics={"loss": 0.5}
    )
    assert set(ProbsReply(PROBS).to_reply(protocol.PREDICT_PUBLIC).arrays) == {"probs"}
    assert set(ProbsReply(PROBS, "uint8").to_reply(protocol.PREDICT_PUBLIC).arrays) == {
        "probs.uint8"
    }
    labels = LabelsReply(np.zeros(4, np.uint8)).to_reply(protocol.PREDICT_PUBLIC)
    assert set(labels.arrays) == {"labels"}


def test_a_request_of_ones_own_needs_only_fields():
    @dataclass(frozen=True)
    class Sharpen(Request):
        task: ClassVar[str] = protocol.TRAIN_LOCAL
        epochs: int = always_sent(1)
        power: float = 2.0
        note: str | None = None

    assert Sharpen(3).config == {"epochs": 3}
    assert Sharpen(3, power=4.0, note="x").config == {"epochs": 3, "power": 4.0, "note": "x"}
    message = protocol.Message(protocol.TRAIN_LOCAL, {"epochs": 2.0, "power": 1})
    read = Sharpen.from_message(message, CONTEXT)
    assert (read.epochs, read.power, read.note) == (2, 1.0, None)
