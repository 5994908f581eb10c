"""Constraints several algorithms share (algorithms/hyperparameters.py): one rule, one message,
wherever the setting appears."""

import pytest

from cosmosfl.algorithms import Comet, Cosmos, FedMD
from cosmosfl.algorithms.hyperparameters import CONSISTENCY_WEIGHT, EPOCHS, TEACHER
from cosmosfl.core.aggregation import aggregate, apply_temperature


@pytest.mark.parametrize("cls", [Cosmos, FedMD, Comet])
@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("aggregation", "vote", "aggregation 'vote' is not supported; allowed: mean, median"),
        ("trim_fraction", 0.5, r"trim_fraction must lie in \[0, 0.5\), got 0.5"),
        ("temperature", -1.0, r"temperature must be >= 0 \(0 = hard labels\), got -1.0"),
        ("lam", -1.0, r"lam \(λ\) must be >= 0, got -1.0"),
        ("distill_epochs", -1, "distill_epochs must be >= 0, got -1"),
    ],
)
def test_the_soft_label_methods_share_their_teachers_rules(cls, key, value, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        cls(**{key: value})


def test_the_runtime_functions_check_the_same_constraints():
    p = [[[0.5, 0.5]]]
    for call, key, value in [
        (lambda: aggregate(p, "vote"), "aggregation", "vote"),
        (lambda: aggregate(p, "trimmed_mean", trim_fraction=0.5), "trim_fraction", 0.5),
        (lambda: apply_temperature(p[0], -1.0), "temperature", -1.0),
    ]:
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == TEACHER[key].error(key, value)


def test_epochs_and_the_consistency_weight():
    assert EPOCHS.describe() == "an integer >= 0"
    assert CONSISTENCY_WEIGHT.error("lam", 0.0) is None
