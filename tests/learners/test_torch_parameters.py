"""TorchLearner's parameter access and training hooks (weights in and out, frozen parameters,
extra loss terms: the proximal and distillation terms of learners/torch_terms.py) and the
client's model slots that the parameter-sharing baselines' handlers drive."""

import numpy as np
import pytest
import torch

from cosmosfl.client import Client
from cosmosfl.core import protocol as P
from cosmosfl.handlers import ditto, fedbabu
from cosmosfl.handlers.fedbabu import frozen_parameters
from cosmosfl.learners.sklearn import SklearnLearner
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.learners.torch_terms import distillation_term, proximal_term
from cosmosfl.models import build_model


def learner(seed=0, model="cnn"):
    net = build_model(model, in_channels=1, num_classes=3, image_size=8, seed=seed, width=0.25)
    return TorchLearner(net, seed=seed)


def data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, n)


def params(lrn):
    return {n: p.detach().clone() for n, p in lrn.model.named_parameters()}


def test_weights_round_trip_and_refuse_other_shapes():
    a, b = learner(0), learner(1)
    w = a.get_weights()
    # Parameters and BatchNorm statistics travel; the integer batch counters do not.
    assert all(v.dtype == np.float32 for v in w.values())
    assert any(n.endswith("running_var") for n in w)
    assert not any(n.endswith("num_batches_tracked") for n in w)
    b.set_weights(w)
    for n, v in b.get_weights().items():
        np.testing.assert_array_equal(v, w[n])
    with pytest.raises(ValueError, match="missing"):
        b.set_weights({k: v for k, v in list(w.items())[1:]})
    other = learner(0, model="mlp").get_weights()
    with pytest.raises(ValueError):
        b.set_weights(other)


def test_frozen_head_or_body_does_not_move():
    x, y = data()
    for freeze, moves_head in (("head", False), ("body", True)):
        lrn = learner()
        head = set(lrn.head_names())
        assert head == {"classifier.weight", "classifier.bias"}
        before = params(lrn)
        lrn.fit(x, y, epochs=1, frozen=frozen_parameters(lrn, freeze))
        after = params(lrn)
        for n in before:
            moved = not torch.equal(before[n], after[n])
            assert moved == ((n in head) == moves_head), (freeze, n)
        assert all(p.requires_grad for p in lrn.model.parameters())  # restored


def test_proximal_term_keeps_weights_near_the_reference():
    x, y = data()
    free, held = learner(), learner()
    start = params(free)
    free.fit(x, y, epochs=3)
    held.fit(x, y, epochs=3, extra_losses=[proximal_term(held, 1e4)])

    def drift(lrn):
        return sum(
            float(((p.detach() - start[n]) ** 2).sum()) for n, p in lrn.model.named_parameters()
        )

    assert drift(held) < 0.1 * drift(free)


def test_plain_fit_is_unchanged_by_the_new_options_at_their_defaults():
    x, y = data()
    a, b = learner(), learner()
    a.fit(x, y, epochs=2)
    b.fit(x, y, epochs=2, frozen=frozen_parameters(b, ""), extra_losses=[])
    for n, v in a.get_weights().items():
        np.testing.assert_array_equal(v, b.get_weights()[n])


def test_distillation_from_a_teacher_pulls_predictions_towards_it():
    x, y = data()
    teacher, plain, student = learner(5), learner(), learner()
    plain.fit(x, y, epochs=2)
    student.fit(x, y, epochs=2, extra_losses=[distillation_term(teacher, 50.0, 1.0)])
    t = teacher.predict_proba(x)

    def gap(lrn):
        return float(np.abs(lrn.predict_proba(x) - t).sum(axis=1).mean())

    assert gap(student) < gap(plain)


def client(lrn=None):
    x, y = data()
    return Client(0, lrn or learner(), (x, y), (x[:8], y[:8]))


def test_slots_are_independent_copies_addressed_by_config():
    c = client()
    c.handlers = fedbabu.HANDLERS  # trains slots, and starts one from another (init_from)
    main_before = c.learner.get_weights()
    reply = c.handle(P.Message(P.TRAIN_LOCAL, {"epochs": 1, "slot": "global"}))
    assert reply.ok and set(c.slots) == {"global"}
    for n, v in c.learner.get_weights().items():  # training the slot left `learner` alone
        np.testing.assert_array_equal(v, main_before[n])
    got = c.handle(P.Message(P.GET_WEIGHTS, {"slot": "global"}))
    assert got.metrics["num_samples"] == 48
    assert any(not np.array_equal(got.arrays[n], main_before[n]) for n in main_before)
    # init_from copies another slot's weights before training (0 epochs: a plain copy).
    c.handle(P.Message(P.TRAIN_LOCAL, {"epochs": 0, "slot": "personal", "init_from": "global"}))
    for n, v in c.slots["personal"].get_weights().items():
        np.testing.assert_array_equal(v, got.arrays[n])
    # Client state covers the learner and every slot.
    state = c.get_state()
    fresh = client()
    fresh.set_state(state)
    for name in ("global", "personal"):
        for n, v in fresh.slots[name].get_weights().items():
            np.testing.assert_array_equal(v, c.slots[name].get_weights()[n])


def test_parameter_tasks_on_a_sklearn_client_are_a_clear_error():
    from sklearn.linear_model import LogisticRegression

    x, y = data()
    c = Client(
        0,
        SklearnLearner(LogisticRegression(), num_classes=3),
        (x.reshape(48, -1), y),
        (x[:8].reshape(8, -1), y[:8]),
        handlers=ditto.HANDLERS,
    )
    for message in (P.Message(P.GET_WEIGHTS), P.Message(P.TRAIN_LOCAL, {"slot": "global"})):
        reply = c.handle(message)
        assert not reply.ok and "SklearnLearner has none" in reply.error


def test_batchnorm_recalibration_recomputes_statistics_for_the_current_weights():
    x, _ = data()
    lrn = learner()
    bn = lrn.model.features[1]
    bn.running_mean.fill_(5.0)
    bn.running_var.fill_(100.0)
    before = params(lrn)
    lrn.recalibrate_batchnorm(x)
    with torch.no_grad():
        out = lrn.model.features[0](torch.from_numpy(x))
    torch.testing.assert_close(bn.running_mean, out.mean(dim=(0, 2, 3)))
    torch.testing.assert_close(bn.running_var, out.var(dim=(0, 2, 3), unbiased=True))
    assert bn.momentum == 0.1  # restored
    for n, p in lrn.model.named_parameters():  # no training
        assert torch.equal(p, before[n])
