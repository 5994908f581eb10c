"""Fault injection: every corruption class is rejected with its reason; faults are seeded,
stateless and have the documented effect on clients and on the round."""

import numpy as np
import pytest

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines import InProcessEngine
from cosmosfl.engines.faults import (
    CORRUPTIONS,
    FaultConfig,
    FaultInjector,
    corrupt_array,
)
from cosmosfl.engines.simulation import ParticipationError
from cosmosfl.experiment import simulate
from cosmosfl.learners.base import Learner

N, M = 6, 4
CONTEXT = {"n": N, "m": M}
LIMIT = 10_000

# The reason a user reads for each corruption class: soft labels, then hard labels (FedCT).
REASONS = {
    "nan": ("non-finite values", "not an integer type"),
    "inf": ("non-finite values", "not an integer type"),
    "negative": ("negative values", "label values must lie in [0, 4)"),
    "non_simplex": ("rows must sum to 1", "label values must lie in [0, 4)"),
    "wrong_shape": ("does not match expected (6, 4)", "does not match expected (6,)"),
    "wrong_dtype": ("dtype int32 not allowed", "dtype float32 is not an integer type"),
    "label_range": ("rows must sum to 1", "label values must lie in [0, 4)"),
    "empty": ("array is empty", "array is empty"),
    "truncated": ("truncated: 3 of 6 rows", "truncated: 3 of 6 rows"),
    "oversized": ("exceeds the limit of 10000", "exceeds the limit of 10000"),
    "not_an_array": ("expected a numpy array", "expected a numpy array"),
}


class Fixed(Learner):
    num_classes = 2

    def __init__(self):
        self.fits = 0

    def fit(self, x, y, *, epochs=1):
        self.fits += 1
        return {}

    def predict_proba(self, x):
        return np.tile(np.array([[0.25, 0.75]], np.float32), (len(x), 1))

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        return {}


def make_clients(*learners):
    x = np.zeros((4, 1), np.float32)
    y = np.array([0, 1, 0, 1])
    return [Client(i, lr, (x, y), (x, y)) for i, lr in enumerate(learners)]


PUBLIC = np.zeros((5, 1), np.float32)


class Probe(Algorithm):
    """One predict per round; reports every client that answered."""

    name = "probe"

    def run_round(self, fed, round_num):
        replies = fed.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in fed.client_ids})
        rec = RoundRecord()
        rec.accuracy["x"] = {c: 1.0 for c in replies}
        return rec


def test_every_corruption_class_has_a_named_reason():
    assert set(REASONS) == set(CORRUPTIONS)


def _soft():
    rng = np.random.default_rng(0)
    return rng.dirichlet(np.ones(M), size=N).astype(np.float32)


def _hard():
    return np.array([0, 1, 2, 3, 0, 1], dtype=np.uint8)


@pytest.mark.parametrize("kind", CORRUPTIONS)
@pytest.mark.parametrize("hard", [False, True], ids=["probs", "labels"])
def test_each_corruption_is_rejected_with_its_reason(kind, hard):
    clean, spec = (_hard(), protocol.LABELS) if hard else (_soft(), protocol.PROBS)
    protocol.validate_array("x", clean, spec, CONTEXT, client_id=3, task="t", max_bytes=LIMIT)
    bad = corrupt_array(clean, kind, np.random.default_rng(1), m=M, max_bytes=LIMIT)
    with pytest.raises(protocol.PayloadError) as err:
        protocol.validate_array("x", bad, spec, CONTEXT, client_id=3, task="t", max_bytes=LIMIT)
    assert REASONS[kind][hard] in err.value.reason
    assert "client 3" in str(err.value)


def test_decisions_are_stateless_and_shared_between_modes():
    ids = list(range(40))
    drop = FaultInjector(FaultConfig(dropout=0.25), ids, seed=7)
    again = FaultInjector(FaultConfig(dropout=0.25), ids, seed=7)
    corrupt = FaultInjector(FaultConfig(corrupt=0.25), ids, seed=7)
    for r in (1, 2, 3):
        hit = [c for c in ids if drop.fault(r, c, protocol.DISTILL) == "dropout"]
        assert hit == [c for c in ids if again.fault(r, c, protocol.DISTILL) == "dropout"]
        assert hit == [c for c in ids if corrupt.fault(r, c, protocol.DISTILL) == "corrupt"]
        assert 3 <= len(hit) <= 18  # a quarter of 40, loosely
    other = FaultInjector(FaultConfig(dropout=0.25), ids, seed=8)
    assert [other.fault(1, c, protocol.DISTILL) for c in ids] != [
        drop.fault(1, c, protocol.DISTILL) for c in ids
    ]
    assert drop.fault(1, 0, protocol.EVALUATE) is None  # evaluation is a measurement, never faulted
    only = FaultInjector(FaultConfig(dropout=1.0, tasks=[protocol.PREDICT_PUBLIC]), ids, seed=7)
    assert only.fault(1, 0, protocol.TRAIN_LOCAL) is None and only.fault(
        1, 0, protocol.PREDICT_PUBLIC
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"dropout": 1.5}, r"faults.dropout = 1.5 must be a fraction"),
        ({"dropout": 0.6, "crash": 0.6}, "must be <= 1"),
        ({"corruption": "garbage"}, "faults.corruption = 'garbage'; allowed: random, nan"),
        ({"tasks": ["evaluate"]}, "faults.tasks"),
        ({"byzantine_mode": "evil"}, "allowed: random, flip, fixed"),
    ],
)
def test_fault_config_errors_name_the_field(raw, message):
    with pytest.raises(ValueError, match=message):
        FaultConfig(**raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"byzantine": -0.1}, r"^faults\.byzantine = -0\.1 must be a fraction in \[0, 1\]$"),
        ({"straggler": "half"}, r"^faults\.straggler = 'half' must be a fraction in \[0, 1\]$"),
        ({"byzantine_class": -1}, r"^faults\.byzantine_class = -1 must be an integer >= 0$"),
        ({"tasks": "train_local"}, r"^faults\.tasks = 'train_local'; allowed: a list of "),
        ({"dropout": 0.5, "corrupt": 0.6}, r"^faults: dropout \+ .* = 1\.1 must be <= 1$"),
    ],
)
def test_fault_config_constraints_name_the_dotted_key(raw, message):
    with pytest.raises(ValueError, match=message):
        FaultConfig(**raw)
    FaultConfig(dropout=0.5, corrupt=0.5, byzantine=1, byzantine_class=3, tasks=[])


def _train_and_predict(fault, **kwargs):
    learners = [Fixed(), Fixed()]
    engine = InProcessEngine(make_clients(*learners), PUBLIC, seed=0, **kwargs)
    engine._round = 1
    engine.faults.fault = lambda r, c, t: fault if c == 1 else None  # fault client 1 only
    train = engine.send({c: protocol.Message(protocol.TRAIN_LOCAL) for c in (0, 1)})
    predict = engine.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in (0, 1)})
    return engine, learners, train, predict


def test_dropout_client_does_no_work_and_sends_nothing():
    engine, learners, train, predict = _train_and_predict("dropout", faults={"dropout": 0.5})
    assert list(train) == [0] and list(predict) == [0]
    assert learners[1].fits == 0 and engine._bytes_down[1] == 0 and engine._bytes_up[1] == 0
    assert engine._rejected == []
    assert {"client": 1, "task": protocol.PREDICT_PUBLIC, "fault": "dropout"} in engine._faults


def test_straggler_does_the_work_but_its_late_reply_is_discarded():
    engine, learners, train, predict = _train_and_predict("straggler", faults={"straggler": 0.5})
    assert list(train) == [0] and list(predict) == [0]
    assert learners[1].fits == 1  # the local work happened
    assert "after the deadline" in engine._rejected[0]["reason"]


def test_crash_excludes_the_client_even_in_a_strict_run():
    engine, learners, train, _ = _train_and_predict("crash", faults={"crash": 0.5})
    assert engine.strict and list(train) == [0] and learners[1].fits == 0
    assert "InjectedCrash" in engine._rejected[0]["reason"]


def test_corrupt_payload_is_rejected_and_counted():
    engine, _, train, predict = _train_and_predict(
        "corrupt", faults={"corrupt": 0.5, "corruption": "nan"}
    )
    assert list(train) == [0, 1]  # nothing to corrupt in a reply without arrays
    assert list(predict) == [0]
    (rejected,) = engine._rejected
    assert rejected["client"] == 1 and "non-finite" in rejected["reason"]


def test_min_participation_ends_the_run_with_a_clear_error():
    clients = make_clients(Fixed(), Fixed(), Fixed(), Fixed())
    with pytest.raises(ParticipationError, match=r"only 2 of 4 clients.*needs 3"):
        engine = InProcessEngine(clients, PUBLIC, faults={"dropout": 0.5}, min_participation=0.75)
        engine.faults.fault = lambda r, c, t: "dropout" if c < 2 else None
        engine.send({c: protocol.Message(protocol.PREDICT_PUBLIC) for c in range(4)})


def test_round_records_faults_and_byzantine_clients():
    result = simulate(
        Probe(), make_clients(*[Fixed() for _ in range(5)]), PUBLIC, rounds=3,
        faults={"dropout": 0.4, "byzantine": 0.4}, seed=3,
    )  # fmt: skip
    for rec in result.records:
        dropped = {f["client"] for f in rec["faults"] if f["fault"] == "dropout"}
        assert set(rec["accuracy"]["x"]) == {str(c) for c in range(5)} - {str(c) for c in dropped}
        assert len(rec["byzantine"]) == 2
    assert any(rec["faults"] for rec in result.records)


@pytest.mark.parametrize("mode", ["random", "flip", "fixed"])
def test_byzantine_replies_are_valid_and_hostile(mode):
    ids = list(range(10))
    inj = FaultInjector(FaultConfig(byzantine=0.2, byzantine_mode=mode, byzantine_class=2), ids, 0)
    assert len(inj.byzantine) == 2
    bad = sorted(inj.byzantine)[0]
    honest = next(c for c in ids if c not in inj.byzantine)
    soft, hard = _soft(), _hard()
    reply = protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"probs": soft})
    assert inj.byzantine_reply(reply, 1, honest, M) is reply
    out = inj.byzantine_reply(reply, 1, bad, M).arrays["probs"]
    protocol.validate_array("probs", out, protocol.PROBS, CONTEXT, client_id=bad, task="t")
    labels = inj.byzantine_reply(
        protocol.Reply(protocol.PREDICT_PUBLIC, arrays={"labels": hard}), 1, bad, M
    )
    labels = labels.arrays["labels"]
    protocol.validate_array("labels", labels, protocol.LABELS, CONTEXT, client_id=bad, task="t")
    assert labels.dtype == hard.dtype
    if mode == "flip":
        np.testing.assert_array_equal(out, soft[:, ::-1])
        np.testing.assert_array_equal(labels, M - 1 - hard)
    elif mode == "fixed":
        assert (out.argmax(1) == 2).all() and (labels == 2).all()
    else:
        assert not np.allclose(out, soft)


def test_random_corruption_draws_every_class():
    from cosmosfl.engines.faults import FaultConfig, FaultInjector

    inj = FaultInjector(FaultConfig(corrupt=1.0), list(range(10)), seed=0)
    drawn = {inj.corruption(r, c) for r in range(1, 20) for c in range(10)}
    assert drawn == set(CORRUPTIONS)
