"""`cosmosfl.testing.check_algorithm`: it passes on every registered algorithm, and each check
catches the mistake it is for (toy algorithms broken on purpose)."""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pytest

from cosmosfl.algorithms import ALGORITHMS, Algorithm
from cosmosfl.core import protocol
from cosmosfl.core.constraints import Interval
from cosmosfl.core.tasks import GetWeights, TrainLocal
from cosmosfl.testing import (
    ALGORITHM_CHECKS,
    AlgorithmCheckError,
    check_algorithm,
)
from cosmosfl.testing._federation import tiny_federation

from .toy_algorithm import ToyMean


def fast(cls: type[Algorithm]) -> Algorithm:
    """The class with one epoch of everything and two clusters where it clusters: a check of
    every shipped algorithm then takes about a second."""
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    settings = {n: 1 for n in names if n.endswith("_epochs")}
    settings.update({n: 2 for n in ("num_clusters", "target_clusters") if n in names})
    return cls(**settings)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_registered_algorithm_passes_every_check(name):
    report = check_algorithm(fast(ALGORITHMS[name]))
    expected = list(ALGORITHM_CHECKS)
    if "runs_on_flower" in report.skipped:  # Flower not installed here
        expected.remove("runs_on_flower")
    assert report.passed == expected


def test_a_users_algorithm_passes_and_the_callers_random_state_is_left_alone():
    np.random.seed(3)
    random.seed(3)
    before = np.random.random(), random.random()
    np.random.seed(3)
    random.seed(3)
    check_algorithm(ToyMean(pretrain_epochs=1, local_epochs=1), checks=["seeded_determinism"])
    assert (np.random.random(), random.random()) == before


# -- toys broken on purpose ---------------------------------------------------------------------


@dataclass
class Unseeded(ToyMean):
    """Draws from the global numpy generator, which no seed of cosmosfl sets."""

    name: ClassVar[str] = "unseeded"

    def run_round(self, fed: Any, round_num: int) -> Any:
        record = super().run_round(fed, round_num)
        record.info["draw"] = float(np.random.random())
        return record


@dataclass
class Forgetful(ToyMean):
    """Counts rounds in a field its checkpoints leave out, and trains by that count."""

    name: ClassVar[str] = "forgetful"
    _rounds: int = field(default=0, init=False)

    def epochs_for(self, first_training: bool) -> int:
        self._rounds += 1
        return self._rounds


@dataclass
class Leaky(ToyMean):
    """Says it is model-agnostic, yet its clients serve their weights and it asks for them."""

    name: ClassVar[str] = "leaky"
    client_handlers: ClassVar[str] = "cosmosfl.handlers.params:HANDLERS"

    def run_round(self, fed: Any, round_num: int) -> Any:
        fed.send(dict.fromkeys(fed.client_ids, GetWeights()), protocol.WEIGHTS_ANY)
        return super().run_round(fed, round_num)


@dataclass
class Lax(ToyMean):
    """Skips `Algorithm.__post_init__`, so its declared constraints are never checked."""

    name: ClassVar[str] = "lax"

    def __post_init__(self) -> None:
        pass


@dataclass
class Misdeclared(ToyMean):
    """Constrains an integer setting as a float one (the config layer would then let 1.5
    through to a setting that must be whole)."""

    name: ClassVar[str] = "misdeclared"
    parameter_constraints: ClassVar = {"distill_epochs": Interval(float, 0)}


@dataclass
class EngineBound(ToyMean):
    """Trains longer on one engine than on the other."""

    name: ClassVar[str] = "enginebound"

    def run_round(self, fed: Any, round_num: int) -> Any:
        if type(fed).__name__ == "FlowerFederation":
            fed.send(dict.fromkeys(fed.client_ids, TrainLocal(3)))
        return super().run_round(fed, round_num)


FAST = {"pretrain_epochs": 1, "local_epochs": 1}


@pytest.mark.parametrize(
    ("cls", "check", "message"),
    [
        (Unseeded, "seeded_determinism", "a second run with the same seed gave other records"),
        (Forgetful, "checkpoint_round_trip", "resuming from the round-1 checkpoint gave other"),
        (Leaky, "runs_on_simulation", r"model_agnostic is True but the algorithm sent \['get_"),
        (Lax, "constraints_reject_bad_settings", r"Lax\(pretrain_epochs=-1\) was accepted"),
        (
            Misdeclared,
            "declares_its_contract",
            "distill_epochs is declared int but constrained as float",
        ),
    ],
)
def test_each_check_catches_its_mistake_and_skips_what_depends_on_it(cls, check, message):
    with pytest.raises(AlgorithmCheckError) as caught:
        check_algorithm(cls(**FAST))
    assert list(caught.value.failures) == [check]
    assert re.search(message, caught.value.failures[check])
    dependents = {
        "runs_on_simulation": {"seeded_determinism", "checkpoint_round_trip", "runs_on_flower"},
        "declares_its_contract": set(ALGORITHM_CHECKS) - {"declares_its_contract"},
    }.get(check, set())
    assert set(caught.value.skipped) == dependents
    assert f"- {check}: " in str(caught.value)


def test_an_algorithm_that_depends_on_the_engine_fails_on_flower():
    pytest.importorskip("flwr")
    with pytest.raises(AlgorithmCheckError, match="runs_on_flower: round 1: accuracy on Flower"):
        check_algorithm(EngineBound(**FAST), checks=["runs_on_flower"])


def test_checks_can_be_chosen_and_the_federation_given():
    def three_clients(seed: int) -> Any:
        clients, public_x = tiny_federation(seed)
        return clients[:3], public_x

    report = check_algorithm(
        ToyMean(**FAST), federation=three_clients, rounds=3, checks=["checkpoint_round_trip"]
    )
    assert report.passed == ["checkpoint_round_trip"] and report.skipped == {}


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: check_algorithm(ToyMean), TypeError, "takes an Algorithm instance"),
        (lambda: check_algorithm(ToyMean(), rounds=1), ValueError, "rounds must be >= 2"),
        (lambda: check_algorithm(ToyMean(), checks=["speed"]), ValueError, "unknown check"),
    ],
)
def test_wrong_calls_are_refused(call, error, message):
    with pytest.raises(error, match=message):
        call()
