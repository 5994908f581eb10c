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


def test_every_settings_class_with_the_e0_schedule_shares_it():
    """pretrain_epochs (E0) and local_epochs (E) are declared once, in EpochSchedule: the same
    names, defaults and constraint in every algorithm and reference run that has them."""
    import dataclasses

    from cosmosfl.algorithms import ALGORITHMS
    from cosmosfl.algorithms.hyperparameters import EpochSchedule
    from cosmosfl.core.constraints import constraints_of
    from cosmosfl.experiment.config import reference_runs

    classes = {**ALGORITHMS, **reference_runs()}
    scheduled = [
        name
        for name, cls in classes.items()
        if "pretrain_epochs" in {f.name for f in dataclasses.fields(cls)}
    ]
    assert len(scheduled) == len(classes)  # today every class trains clients on private data
    for name in scheduled:
        cls = classes[name]
        assert issubclass(cls, EpochSchedule), name
        assert "pretrain_epochs" not in vars(cls).get("__annotations__", {}), name
        instance = cls()
        assert (instance.pretrain_epochs, instance.local_epochs) == (5, 5), name
        assert constraints_of(cls)["pretrain_epochs"] is constraints_of(cls)["local_epochs"]
        assert constraints_of(cls)["local_epochs"] is EPOCHS
