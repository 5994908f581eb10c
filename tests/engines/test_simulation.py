import numpy as np
import pytest

from cosmosfl.algorithms.base import Algorithm, RoundRecord
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines import ClientError, InProcessEngine
from cosmosfl.engines.simulation import ClientRejectedError, ClientRejectedWarning
from cosmosfl.experiment import simulate
from cosmosfl.learners.base import Learner


class Fixed(Learner):
    num_classes = 2

    def __init__(self, probs=None, fail=False):
        self.probs, self.fail = probs, fail

    def fit(self, x, y, *, epochs=1):
        if self.fail:
            raise RuntimeError("disk full")
        return {}

    def predict_proba(self, x):
        p = np.tile(np.array([[0.25, 0.75]], np.float32), (len(x), 1))
        return p if self.probs is None else self.probs(len(x))

    def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
        return {}


def make_clients(*learners):
    x = np.zeros((4, 1), np.float32)
    y = np.array([0, 1, 0, 1])
    return [Client(i, lr, (x, y), (x, y)) for i, lr in enumerate(learners)]


PUBLIC = np.zeros((5, 1), np.float32)


class Probe(Algorithm):
    """Sends one predict and one distill per round; reports nothing else."""

    name = "probe"

    def run_round(self, fed, round_num):
        with fed.phase("prediction"):
            replies = fed.send(
                {c: protocol.Message(protocol.PREDICT_PUBLIC) for c in fed.client_ids}
            )
        targets = np.full((len(fed.public_x), 2), 0.5, np.float32)
        fed.send({c: protocol.Message(protocol.DISTILL, {}, {"targets": targets}) for c in replies})
        rec = RoundRecord()
        rec.accuracy["x"] = {c: 1.0 for c in replies}
        return rec


def test_bytes_counted_per_client_and_direction():
    result = simulate(Probe(), make_clients(Fixed(), Fixed()), PUBLIC, rounds=2)
    for rec in result.records:
        assert rec["bytes_up"] == {"0": 5 * 2 * 4, "1": 5 * 2 * 4}
        assert rec["bytes_down"] == {"0": 5 * 2 * 4, "1": 5 * 2 * 4}
        assert rec["seconds"]["prediction"] >= 0 and rec["seconds"]["total"] >= 0
    assert result.bytes["up"] == [{0: 40, 1: 40}, {0: 40, 1: 40}]


def test_bad_payload_excluded_and_recorded():
    def bad(n):
        return np.full((n, 2), 0.9, np.float32)  # rows sum to 1.8

    with pytest.warns(ClientRejectedWarning, match=r"client 1's reply to task 'predict_public'"):
        result = simulate(
            Probe(), make_clients(Fixed(), Fixed(bad)), PUBLIC, rounds=1, strict=False
        )
    rec = result.records[0]
    assert rec["accuracy"]["x"] == {"0": 1.0}
    assert rec["rejected"] == [
        {"client": 1, "task": protocol.PREDICT_PUBLIC, "reason": rec["rejected"][0]["reason"]}
    ]
    assert "sum to 1" in rec["rejected"][0]["reason"]
    assert rec["bytes_down"]["1"] == 0  # the excluded client got no distillation targets


def test_a_strict_run_stops_at_a_bad_payload_and_names_client_task_and_reason():
    def bad(n):
        return np.full((n, 2), 0.75, np.float32)  # rows sum to 1.5

    with pytest.raises(
        ClientRejectedError, match=r"client 1's reply to task 'predict_public'"
    ) as e:
        simulate(Probe(), make_clients(Fixed(), Fixed(bad)), PUBLIC, rounds=2)
    assert (e.value.round_num, e.value.client_id, e.value.task) == (1, 1, protocol.PREDICT_PUBLIC)
    assert "sums to 1.5" in e.value.reason and "sums to 1.5" in str(e.value)
    assert isinstance(e.value, ClientError) and isinstance(e.value, ValueError)


def test_the_engine_alone_only_records_rejections_unless_asked():
    def bad(n):
        return np.full((n, 2), 0.75, np.float32)

    messages = {c: protocol.Message(protocol.PREDICT_PUBLIC) for c in (0, 1)}
    engine = InProcessEngine(make_clients(Fixed(), Fixed(bad)), PUBLIC)  # the default: record
    assert list(engine.send(messages)) == [0]
    assert [r["client"] for r in engine._rejected] == [1]
    with pytest.raises(ValueError, match="on_reject"):
        InProcessEngine(make_clients(Fixed()), PUBLIC, on_reject="ignore")


def test_client_exception_stops_a_strict_run_with_the_traceback():
    engine = InProcessEngine(make_clients(Fixed(), Fixed(fail=True)), PUBLIC)
    with pytest.raises(ClientError, match=r"client 1 failed task 'train_local'.*disk full") as err:
        engine.send(
            {0: protocol.Message(protocol.TRAIN_LOCAL), 1: protocol.Message(protocol.TRAIN_LOCAL)}
        )
    assert "in fit" in str(err.value)  # the client's own traceback is kept


def test_client_exception_becomes_rejection_and_all_failing_is_an_error():
    engine = InProcessEngine(make_clients(Fixed(), Fixed(fail=True)), PUBLIC, strict=False)
    replies = engine.send(
        {0: protocol.Message(protocol.TRAIN_LOCAL), 1: protocol.Message(protocol.TRAIN_LOCAL)}
    )
    assert list(replies) == [0]
    engine = InProcessEngine(make_clients(Fixed(fail=True)), PUBLIC, strict=False)
    with pytest.raises(RuntimeError, match=r"every client failed.*disk full"):
        engine.send({0: protocol.Message(protocol.TRAIN_LOCAL)})


def test_federation_checks():
    with pytest.raises(ValueError, match="at least one client"):
        InProcessEngine([], PUBLIC)
    a, b = make_clients(Fixed(), Fixed())
    b.id = 0
    with pytest.raises(ValueError, match="unique"):
        InProcessEngine([a, b], PUBLIC)
    other = Fixed()
    other.num_classes = 3
    with pytest.raises(ValueError, match="same number of classes"):
        InProcessEngine(make_clients(Fixed(), other), PUBLIC)
    with pytest.raises(ValueError, match="empty"):
        InProcessEngine(make_clients(Fixed()), PUBLIC[:0])
    with pytest.raises(ValueError, match="rounds"):
        simulate(Probe(), make_clients(Fixed()), PUBLIC, rounds=0)
