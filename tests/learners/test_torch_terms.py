"""The extra loss terms of TorchLearner.fit (learners/torch_terms.py): the proximal term and the
distillation from a teacher."""

import numpy as np

from cosmosfl.learners.torch_terms import distillation_term, proximal_term

from .test_torch import data, learner
from .test_torch import named_params as params


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


def test_distillation_from_a_teacher_pulls_predictions_towards_it():
    x, y = data()
    teacher, plain, student = learner(5), learner(), learner()
    plain.fit(x, y, epochs=2)
    student.fit(x, y, epochs=2, extra_losses=[distillation_term(teacher, 50.0, 1.0)])
    t = teacher.predict_proba(x)

    def gap(lrn):
        return float(np.abs(lrn.predict_proba(x) - t).sum(axis=1).mean())

    assert gap(student) < gap(plain)
