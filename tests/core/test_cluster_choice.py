"""Choosing the clients' clusters (core/cluster_choice.py): greedy or average linkage, with K
given or chosen by a rule from the distances alone."""

import numpy as np
import pytest

from cosmosfl.core.cluster_choice import choose_clusters
from cosmosfl.core.clustering import assignment_from_clusters

from .test_clustering import grouped, same_partition
from .test_linkage import random_distances


@pytest.mark.parametrize("method", ["greedy", "average-linkage"])
def test_silhouette_finds_the_groups_without_being_told_k(method):
    for k in (2, 3, 7):
        d, labels = grouped([4] * k, within=0.2, between=1.2, noise=0.1, seed=k)
        chosen = choose_clusters(d, method, "silhouette")
        assert same_partition(chosen.clusters, labels), (method, k)


def test_average_linkage_keeps_groups_apart_where_single_distances_overlap():
    # Within-group distances reach above between-group ones (noisy pseudo-labels): Algorithm
    # 1's single threshold merges groups at K <= 4; the groups' mean distances still separate
    # them, so average linkage recovers them, given K or not.
    d, labels = grouped([5] * 4, within=0.3, between=1.0, noise=0.9, seed=3)
    upper = np.triu(np.ones_like(d, dtype=bool), 1)
    same = labels[:, None] == labels[None, :]
    assert d[upper & same].max() > d[upper & ~same].min()  # the distances overlap
    greedy = choose_clusters(d, "greedy", "target", target=4)
    assert not same_partition(greedy.clusters, labels)
    for rule in ("target", "silhouette", "largest-gap"):
        chosen = choose_clusters(d, "average-linkage", rule, target=4)
        assert same_partition(chosen.clusters, labels), rule


def test_clusters_cover_every_client_once_on_degenerate_inputs():
    for n in (0, 1, 2):
        d = np.ones((n, n)) - np.eye(n)
        for method in ("greedy", "average-linkage"):
            for rule in ("target", "silhouette", "largest-gap"):
                chosen = choose_clusters(d, method, rule, target=1)
                assert sorted(i for c in chosen.clusters for i in c) == list(range(n))
    one = choose_clusters(np.zeros((6, 6)), "average-linkage", "target", target=1)
    assert (assignment_from_clusters(one.clusters, 6) == 0).all()


def test_bad_method_and_greedy_silhouette_size_limit():
    d = random_distances(4, 0)
    with pytest.raises(ValueError, match="greedy, average-linkage"):
        choose_clusters(d, "kmeans")
    big = random_distances(401, 1)
    with pytest.raises(ValueError, match="average-linkage"):
        choose_clusters(big, "greedy", "silhouette")
