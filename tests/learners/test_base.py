"""The Learner contract's input checks (learners/base.py): our learners reject bad shapes with a
message that gives the shapes."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from cosmosfl import SklearnLearner

from ..test_testing import make_torch


def test_our_learners_reject_bad_shapes_with_the_shapes():
    x = np.zeros((6, 1, 8, 8), np.float32)
    for learner in (make_torch(0), SklearnLearner(LogisticRegression(), num_classes=10)):
        with pytest.raises(ValueError, match="x has 6 samples but y has 5 labels"):
            learner.fit(x, np.zeros(5, np.int64))
        with pytest.raises(ValueError, match=r"labels must lie in \[0, 10\), got \[0, 10\]"):
            learner.fit(x, np.array([0, 1, 2, 3, 4, 10]))
        with pytest.raises(
            ValueError, match=r"targets must have shape .* = \(6, 10\), got \(6, 11\)"
        ):
            learner.distill(x, np.full((6, 11), 1 / 11, np.float32))
        with pytest.raises(ValueError, match=r"weights must have shape \(6,\), got \(5,\)"):
            learner.distill(x, np.full((6, 10), 0.1, np.float32), np.ones(5, np.float32))
