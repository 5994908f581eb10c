"""The algorithm contract (algorithms/base.py): the E0 schedule, the reported model and its
deprecated name, display names, and the declared hyperparameter constraints."""

import dataclasses
import typing
from dataclasses import dataclass
from typing import ClassVar

import pytest

from cosmosfl.algorithms import ALGORITHMS, Algorithm, Cosmos, FedAvg, Local
from cosmosfl.algorithms.base import RoundRecord
from cosmosfl.core.constraints import Interval, Options, constraints_of
from cosmosfl.experiment.config import ConfigError, validate_algorithm


@pytest.mark.parametrize(
    "name",
    [
        n
        for n, cls in ALGORITHMS.items()
        if {"pretrain_epochs", "local_epochs"} <= {f.name for f in dataclasses.fields(cls)}
    ],
)
def test_the_e0_schedule_is_pretrain_epochs_first_then_local_epochs(name):
    algo = ALGORITHMS[name](pretrain_epochs=7, local_epochs=2)
    assert (algo.epochs_for(True), algo.epochs_for(False)) == (7, 2)


def test_reported_model_names_the_evaluation_point_and_primary_model_follows_it():
    # COSMOS's depends on its recipe: what each client deploys, or h_π(i) for the paper's.
    assert Cosmos.reported_model == Cosmos.primary_model == "deployed"
    assert Cosmos(recipe="paper").reported_model == "cluster_model"
    assert FedAvg.reported_model == FedAvg.primary_model == "global_model"
    assert Local.reported_model == "client_model"


def test_defining_primary_model_still_works_but_is_deprecated():
    with pytest.warns(DeprecationWarning, match=r"Old\.primary_model is deprecated"):

        @dataclass
        class Old(Algorithm):
            name: ClassVar[str] = "old"
            primary_model: ClassVar[str] = "mine"

            def run_round(self, fed, round_num):
                return RoundRecord()

    assert Old.reported_model == Old.primary_model == "mine"


def test_display_names_live_on_the_classes_and_default_to_the_name():
    assert Cosmos.display_name == "COSMOS" and FedAvg.display_name == "FedAvg"
    assert Local.display_name == "local"

    @dataclass
    class Mine(FedAvg):
        name: ClassVar[str] = "mine"

    assert Mine.display_name == "mine"  # not FedAvg's


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_constraints_name_settings_of_the_right_type(name):
    cls = ALGORITHMS[name]
    hints = typing.get_type_hints(cls)
    settings = {f.name for f in dataclasses.fields(cls) if f.init}
    for key, constraint in constraints_of(cls).items():
        assert key in settings, f"{name}: constraint on unknown setting {key}"
        types = set(typing.get_args(hints[key]) or (hints[key],))
        if isinstance(constraint, Options):
            assert str in types
        else:
            assert isinstance(constraint, Interval) and constraint.kind in types
            assert (type(None) in types) == (constraint.none is not None), key


def _bad_value(constraint):
    if isinstance(constraint, Options):
        return "no-such-option"
    return constraint.kind(-1)  # every interval here starts at 0 or 1


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_the_config_and_the_constructor_give_one_message_per_constraint(name):
    cls = ALGORITHMS[name]
    for key, constraint in constraints_of(cls).items():
        value = _bad_value(constraint)
        if constraint.error(key, value) is None:
            continue
        with pytest.raises(ValueError) as built:
            cls(**{key: value})
        with pytest.raises(ConfigError) as configured:
            validate_algorithm({"name": name, key: value})
        assert str(configured.value) == f"algorithm ({name}): {built.value}"
        assert key in str(built.value) and repr(value).strip("'") in str(built.value)
