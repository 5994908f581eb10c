"""COSMOS's settings (algorithms/cosmos_settings.py) are kept as given and fixed once built;
what "auto" stands for is derived when read; cluster membership reads them from the algorithm
instead of a copy."""

import copy
import dataclasses
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.cosmos_membership import Membership
from cosmosfl.algorithms.cosmos_settings import HOOKS, CosmosSettings

SETTINGS = [f.name for f in dataclasses.fields(CosmosSettings) if f.name not in HOOKS]


@pytest.mark.parametrize("name", SETTINGS)
def test_no_setting_can_be_rewritten_after_construction(name):
    algo = Cosmos()
    before = getattr(algo, name)
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"'{name}'.*build another"):
        setattr(algo, name, before)
    assert getattr(algo, name) == before


def test_a_changed_setting_is_a_new_algorithm_with_its_own_resolution():
    algo = Cosmos()
    greedy = Cosmos(**{**algo.hyperparameters(), "clustering": "greedy"})
    assert (algo.b0_rule_used, algo.target_clusters_used) == ("silhouette", None)
    assert (greedy.b0_rule_used, greedy.target_clusters_used) == ("target", 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        greedy.lam = 0.0
    # A copy (checkpoints, worker processes) is as fixed as the original.
    for twin in (copy.deepcopy(greedy), pickle.loads(pickle.dumps(greedy))):
        assert twin.clustering == "greedy"
        with pytest.raises(dataclasses.FrozenInstanceError):
            twin.clustering = "average-linkage"


@pytest.mark.parametrize(
    ("given", "rule", "target"),
    [
        ({}, "silhouette", None),
        ({"clustering": "greedy"}, "target", 5),
        ({"target_clusters": 3}, "target", 3),
        ({"b0": 0.4}, "target", None),
        ({"clustering": "greedy", "b0_rule": "largest-gap"}, "largest-gap", None),
    ],
)
def test_auto_is_resolved_when_read_and_the_settings_stay_as_given(given, rule, target):
    algo = Cosmos(**given)
    assert (algo.b0_rule_used, algo.target_clusters_used) == (rule, target)
    assert algo.b0_rule == given.get("b0_rule", "auto")
    assert algo.target_clusters == given.get("target_clusters")
    # What the algorithm reports as its settings rebuilds the same algorithm.
    assert Cosmos(**algo.hyperparameters()) == algo


def test_the_hooks_the_experiment_layer_hands_in_stay_assignable():
    algo = Cosmos()
    algo.server_learner = factory = lambda shape, m, seed: None
    algo.public_probe = None
    assert algo.server_learner is factory


def _federation(n_clients: int) -> SimpleNamespace:
    lines: list[str] = []
    return SimpleNamespace(client_ids=list(range(n_clients)), seed=0, log=lines.append, lines=lines)


def _two_groups() -> dict[int, np.ndarray]:
    """Pseudo-labels of four clients in two pairs, 0.2 and 0.3 apart, at least 0.8 across."""
    a = np.tile([1.0, 0.0], (10, 1))
    a2 = np.tile([0.9, 0.1], (10, 1))
    b = np.tile([0.5, 0.5], (10, 1))
    b2 = np.tile([0.35, 0.65], (10, 1))
    return {0: a, 1: a2, 2: b, 3: b2}


def test_membership_reads_the_settings_of_the_algorithm_it_belongs_to():
    algo = Cosmos(clustering="greedy", b0=0.35)
    assert algo.membership.settings is algo
    update = algo.membership.update(_two_groups(), _federation(4), round_num=1)
    assert algo.b0_used == 0.35  # the algorithm's B0, not a default of Membership's
    assert update.assignment == {0: 0, 1: 0, 2: 1, 3: 1}


@pytest.mark.parametrize(
    ("settings", "clusters"),
    [
        (Cosmos(clustering="greedy", b0=0.1), 4),  # nobody is close
        (Cosmos(clustering="greedy", b0=0.35), 2),
        (Cosmos(clustering="greedy", b0=1.5), 1),
        (Cosmos(clustering="greedy", target_clusters=2), 2),
        (Cosmos(target_clusters=3), 3),  # average linkage: the 0.3 pair split
    ],
)
def test_membership_clusters_by_the_settings_it_is_given(settings, clusters):
    membership = Membership(settings)
    membership.update(_two_groups(), _federation(4), round_num=1)
    assert membership.num_clusters == clusters
    assert membership.settings is settings
