"""Average-linkage clustering and the silhouette rule (core/linkage.py, core/cluster_choice.py)."""

import numpy as np
import pytest
from sklearn.metrics import silhouette_score

from cosmosfl.core.cluster_choice import choose_clusters
from cosmosfl.core.clustering import assignment_from_clusters
from cosmosfl.core.linkage import average_linkage, cut, heights_for, silhouette, widest_gap_k

from .test_threshold_rules import grouped, same_partition


def random_distances(n, seed):
    x = np.random.default_rng(seed).normal(size=(n, 3))
    return np.abs(x[:, None, :] - x[None, :, :]).sum(-1)


@pytest.mark.parametrize("seed", range(5))
def test_silhouette_equals_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    d = random_distances(12, seed)
    labels = rng.integers(0, 4, size=12)
    labels[:4] = [0, 1, 2, 3]  # every cluster exists; some may be singletons
    labels[4] = 9  # a singleton with an odd label value
    assert silhouette(d, labels) == pytest.approx(silhouette_score(d, labels, metric="precomputed"))


def test_silhouette_is_undefined_for_one_cluster_or_all_alone():
    d = random_distances(5, 0)
    with pytest.raises(ValueError, match="2 <= K <= N - 1"):
        silhouette(d, np.zeros(5))
    with pytest.raises(ValueError, match="2 <= K <= N - 1"):
        silhouette(d, np.arange(5))


def test_hand_computed_average_linkage():
    # 0-1 at 1.0, 2-3 at 2.0; across the pairs: 4, 5, 6, 7 -> average 5.5
    d = np.array([[0, 1, 4, 5], [1, 0, 6, 7], [4, 6, 0, 2], [5, 7, 2, 0]], dtype=float)
    tree = average_linkage(d)
    np.testing.assert_allclose(tree[:, 2], [1.0, 2.0, 5.5])
    assert cut(tree, 4, 2) == [[0, 1], [2, 3]]
    assert heights_for(tree, 4, 2) == (2.0, 5.5)
    assert widest_gap_k(tree, 4) == 2  # the gap 2 -> 5.5 is the widest
    chosen = choose_clusters(d, "average-linkage", "target", target=2)
    assert chosen.clusters == [[0, 1], [2, 3]] and (chosen.threshold, chosen.join) == (2.0, 5.5)
    # A fixed B0 cuts the dendrogram at that height.
    at = choose_clusters(d, "average-linkage", threshold=1.5)
    assert at.clusters == [[0, 1], [2], [3]] and at.join == 2.0


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
