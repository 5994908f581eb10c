"""COSMOS's cluster membership (algorithms/cosmos_membership.py): clients that miss the
round-1 clustering join by Algorithm 1's criterion later, and a model inherited on
re-clustering keeps the new model's own random stream."""

import pytest
import torch

from cosmosfl.algorithms.cosmos_membership import inherit_state

from .test_baselines import digits_federation
from .test_reliability import ALGORITHMS, _cosmos_engine


@pytest.mark.parametrize("clustering", ["greedy", "average-linkage"])
def test_cosmos_client_missing_the_clustering_joins_its_groups_cluster(clustering):
    engine, part = _cosmos_engine(lambda r, c, t: "dropout" if r == 1 and c == 0 else None)
    algo = ALGORITHMS["cosmos"]()
    algo.clustering = clustering
    with torch.random.fork_rng(devices=[]):
        first = engine.run_round(algo, 1, 2)
        assert "0" not in first["clusters"]  # it was offline for the clustering
        second = engine.run_round(algo, 2, 2)
    partner = next(c for c in range(1, 10) if part.client_group[c] == part.client_group[0])
    assert second["clusters"]["0"] == second["clusters"][str(partner)]
    assert algo._last_probs == {}  # everyone placed: the clustering is final


@pytest.mark.parametrize("clustering", ["greedy", "average-linkage"])
def test_cosmos_group_missing_the_clustering_gets_its_own_cluster(clustering):
    # Both clients of 0's class group are offline in round 1. Placing the late pair in its
    # nearest existing cluster would give it a teacher for another group's classes; by
    # Algorithm 1's criterion they are B0-close to nobody there, so they form a new cluster,
    # and the clusters made in round 1 stay as they were.
    _, _, part = digits_federation()
    pair = [c for c in range(10) if part.client_group[c] == part.client_group[0]]
    engine, _ = _cosmos_engine(lambda r, c, t: "dropout" if r == 1 and c in pair else None)
    algo = ALGORITHMS["cosmos"]()
    algo.clustering = clustering
    with torch.random.fork_rng(devices=[]):
        first = engine.run_round(algo, 1, 2)
        assert not set(map(str, pair)) & set(first["clusters"])
        assert algo._last_probs  # some client has not answered yet
        second = engine.run_round(algo, 2, 2)
    k = second["clusters"][str(pair[0])]
    assert sorted(int(c) for c, g in second["clusters"].items() if g == k) == pair
    assert k not in first["clusters"].values()  # a new cluster, with its own model
    assert {c: g for c, g in second["clusters"].items() if int(c) not in pair} == first["clusters"]
    assert second["K"] == first["K"] + 1
    assert algo._last_probs == {}


def test_cosmos_round_1_with_fewer_answers_than_target_clusters_clusters_later():
    # 4 answers for target_clusters=5 make 4 singletons (B0 = 0): nothing to place newcomers
    # by, so when the others answer, everyone seen is clustered as in a normal round 1.
    engine, _ = _cosmos_engine(lambda r, c, t: "dropout" if r == 1 and c >= 4 else None)
    algo = ALGORITHMS["cosmos"](clustering="greedy")  # Algorithm 1's B0 = 0
    with torch.random.fork_rng(devices=[]):
        first = engine.run_round(algo, 1, 2)
        assert first["K"] == 4 and first["threshold"] == 0.0
        second = engine.run_round(algo, 2, 2)
    assert len(second["clusters"]) == 10 and second["K"] <= 5


def test_an_inherited_model_keeps_its_own_random_stream():
    source = {"model": {"w": 1}, "generator": "source stream"}
    own = {"model": {"w": 2}, "generator": "own stream"}
    assert inherit_state(source, own) == {"model": {"w": 1}, "generator": "own stream"}
    assert inherit_state("opaque", own) == "opaque"  # another learner's state: as it is
