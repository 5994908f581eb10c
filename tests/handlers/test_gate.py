"""The client's gate on distillation (handlers/gate.py): a step that hurts on the client's
validation slice is undone exactly; one that helps is kept; the decision is in the reply."""

import numpy as np
import torch
from torch import nn

from cosmosfl import Client, TorchLearner
from cosmosfl.core.tasks import Distill, Evaluate
from cosmosfl.handlers import gate
from cosmosfl.handlers.gate import MIN_GATE_ROWS, Rows, helps


def _blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Three well-separated classes in 4-d: easy to learn, easy to unlearn."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centres = np.eye(3, 4) * 4.0
    return (centres[y] + rng.normal(0, 0.5, (n, 4))).astype(np.float32), y.astype(np.int64)


def _client(trained: bool, validation_rows: int = 60) -> Client:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    learner = TorchLearner(net, num_classes=3, lr=1e-2, distill_lr=1e-2, seed=0)
    train, val, test = _blobs(150, 1), _blobs(validation_rows, 2), _blobs(60, 3)
    if trained:
        learner.fit(*train, epochs=20)
    client = Client(id=0, learner=learner, train=train, test=test, validation=val)
    client.public_x = _blobs(200, 4)[0]
    return client


def _distill(client: Client, targets: np.ndarray, gate: bool = True, **kw) -> dict:
    reply = client.handle(Distill(targets, epochs=10, gate=gate, **kw).to_message())
    return dict(reply.metrics)


def _labels_of_public(client: Client, shift: int = 0) -> np.ndarray:
    """One-hot targets on U: the true classes (shift 0) or a planted wrong teacher."""
    y = _blobs(200, 4)[1]
    return np.eye(3, dtype=np.float32)[(y + shift) % 3]


def test_a_planted_bad_teacher_is_refused_and_the_model_stays_exactly_as_it_was():
    client = _client(trained=True)
    before = client.learner.get_state()
    val_before = client.learner.evaluate(*client.validation)["top1"]
    metrics = _distill(client, _labels_of_public(client, shift=1))  # every label wrong
    assert metrics["gate_kept"] == 0.0 and metrics["gate_choice"] == -1.0
    assert metrics["gate_val_after"] < metrics["gate_val_before"] == val_before
    after = client.learner.get_state()
    for name, tensor in before["model"].items():
        assert torch.equal(tensor, after["model"][name]), name
    # The random stream is restored too: the next call draws what it would have drawn.
    assert torch.equal(before["generator"], after["generator"])


def test_without_the_gate_the_same_bad_teacher_damages_the_model():
    client = _client(trained=True)
    val_before = client.learner.evaluate(*client.validation)["top1"]
    metrics = _distill(client, _labels_of_public(client, shift=1), gate=False)
    assert "gate_kept" not in metrics
    assert client.learner.evaluate(*client.validation)["top1"] < val_before - 0.5


def test_a_teacher_that_helps_is_kept():
    client = _client(trained=False)  # an untrained model: the true classes help
    metrics = _distill(client, _labels_of_public(client))
    assert metrics["gate_kept"] == 1.0 and metrics["gate_choice"] == 0.0
    assert metrics["gate_val_after"] > metrics["gate_val_before"]
    assert client.learner.evaluate(*client.validation)["top1"] == metrics["gate_val_after"]


def test_the_gate_chooses_the_better_of_two_candidate_teachers():
    client = _client(trained=False)
    bad, good = _labels_of_public(client, shift=2), _labels_of_public(client)
    metrics = _distill(client, bad, alternative=good)
    assert metrics["gate_kept"] == 1.0 and metrics["gate_choice"] == 1.0
    # The model kept is the alternative's: its validation accuracy is the one reported.
    assert client.learner.evaluate(*client.validation)["top1"] == metrics["gate_val_after"]


def test_too_small_a_slice_cannot_judge_so_the_model_stays_and_the_reply_says_so():
    client = _client(trained=False, validation_rows=MIN_GATE_ROWS - 1)
    before = client.learner.get_state()
    metrics = _distill(client, _labels_of_public(client))  # a teacher that would help
    assert metrics["gate_unjudged"] == 1.0 and metrics["gate_kept"] == 0.0
    assert metrics["gate_rows"] == MIN_GATE_ROWS - 1
    after = client.learner.get_state()
    assert all(torch.equal(t, after["model"][n]) for n, t in before["model"].items())


def _rows(correct: list[int], loss: list[float]) -> Rows:
    return Rows(np.array(correct, bool), np.array(loss, float))


def test_helps_needs_a_gain_beyond_the_noise_of_the_slice_and_honours_the_margin():
    before = _rows([1, 1, 0, 0], [0.2, 0.3, 1.0, 1.2])
    # Every row's loss lower by about the same amount: a clear gain, kept.
    assert helps(before, _rows([1, 1, 0, 0], [0.1, 0.2, 0.9, 1.1]), margin=0.0)
    # The same mean gain from one row only: within the noise of four rows, refused.
    assert not helps(before, _rows([1, 1, 0, 0], [0.2, 0.3, 1.0, 0.8]), margin=0.0)
    # ... but the same pattern over many rows is evidence enough.
    many_before = _rows([1, 1, 0, 0] * 50, [0.2, 0.3, 1.0, 1.2] * 50)
    assert helps(many_before, _rows([1, 1, 0, 0] * 50, [0.2, 0.3, 1.0, 0.8] * 50), margin=0.0)
    # Lower loss but a lost row of accuracy: refused without a margin, kept within one.
    worse_acc = _rows([1, 0, 0, 0], [0.1, 0.2, 0.9, 1.1])
    assert not helps(before, worse_acc, margin=0.0)
    assert helps(before, worse_acc, margin=0.25)
    # Nothing changed: nothing to keep.
    assert not helps(before, before, margin=0.0)


def _mix(client: Client, other_val: np.ndarray, other_test: np.ndarray) -> dict:
    request = Evaluate(mix_validation=other_val, mix_test=other_test)
    reply = client.handle(request.to_message())
    assert reply.error is None, reply.error
    return dict(reply.metrics)


def test_the_deployed_mix_with_alpha_1_is_exactly_the_own_model():
    client = _client(trained=True)
    x_val, x_test = client.validation[0], client.test[0]
    # A useless other model (uniform): the validation slice picks α = 1, the own model.
    uniform_val = np.full((len(x_val), 3), 1 / 3, np.float32)
    uniform_test = np.full((len(x_test), 3), 1 / 3, np.float32)
    metrics = _mix(client, uniform_val, uniform_test)
    assert metrics["alpha"] == 1.0
    assert metrics["top1"] == client.learner.evaluate(*client.test)["top1"]


def test_the_deployed_mix_leans_on_a_better_model_chosen_on_validation_only():
    client = _client(trained=False)  # an untrained own model
    y_val, y_test = client.validation[1], client.test[1]
    oracle_val = np.eye(3, dtype=np.float32)[y_val] * 0.9 + 0.1 / 3
    # On the test rows the other model is the same oracle: the mix scores what it scores.
    oracle_test = np.eye(3, dtype=np.float32)[y_test] * 0.9 + 0.1 / 3
    metrics = _mix(client, oracle_val, oracle_test)
    assert metrics["alpha"] < 0.5 and metrics["top1"] == 1.0
    # α is chosen on the validation rows: a wrong other model there keeps the own model,
    # however good it would have been on the test rows.
    wrong_val = np.eye(3, dtype=np.float32)[(y_val + 1) % 3] * 0.9 + 0.1 / 3
    assert _mix(client, wrong_val, oracle_test)["alpha"] == 1.0


class _FixedModel:
    """A client model that predicts fixed probabilities (row i of `probs` for input row i)."""

    def __init__(self, probs: np.ndarray) -> None:
        self.probs = probs

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.probs[np.asarray(x, int).ravel()]


class _SliceClient:
    def __init__(self, probs: np.ndarray, y: np.ndarray) -> None:
        self.learner = _FixedModel(probs)
        self.rows = (np.arange(len(y)).reshape(-1, 1), y)

    def split(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return self.rows


def test_the_mix_needs_stronger_evidence_than_one_gate_step_on_a_tiny_slice():
    # Ten validation rows of class 0; the own model gives it 0.6 everywhere. The other model
    # is surer on seven rows and less sure on three (same argmax everywhere): a gain one
    # standard error would accept on some weight, but not beyond the noise that searching
    # ten weights on ten rows allows.
    y = np.zeros(10, np.int64)
    own = np.tile([0.6, 0.2, 0.2], (10, 1))
    other = np.array([[0.95, 0.025, 0.025]] * 7 + [[0.35, 0.325, 0.325]] * 3)
    own_rows = gate._rows(own, y)
    mixes = [gate._rows(a * own + (1 - a) * other, y) for a in gate.MIX_WEIGHTS[:-1]]
    assert any(helps(own_rows, m, 0.0, gate.GATE_Z) for m in mixes)  # the premise
    assert gate.deployed_mix(_SliceClient(own, y), other, other, "test")["alpha"] == 1.0
    # Ten times the rows with the same pattern is evidence enough: the mix leans on it.
    y10, own10, other10 = np.tile(y, 10), np.tile(own, (10, 1)), np.tile(other, (10, 1))
    assert gate.deployed_mix(_SliceClient(own10, y10), other10, other10, "test")["alpha"] < 1.0
