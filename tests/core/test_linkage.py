"""Average-linkage clustering and the silhouette (core/linkage.py); choosing the clusters with
them (core/cluster_choice.py): test_cluster_choice.py."""

import numpy as np
import pytest
from sklearn.metrics import silhouette_score

from cosmosfl.core.cluster_choice import choose_clusters
from cosmosfl.core.linkage import (
    average_linkage,
    cut,
    heights_for,
    silhouette,
    silhouette_k,
    widest_gap_k,
)


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


def _silhouette_k_from_scratch(d: np.ndarray, tree: np.ndarray) -> int:
    """The definition: score every cut(tree, n, k) from scratch, first best K wins."""
    n, best_k, best = d.shape[0], 1, -np.inf
    for k in range(2, n):
        clusters = cut(tree, n, k)
        if not 2 <= len(clusters) <= n - 1:
            continue
        labels = np.empty(n, dtype=int)
        for label, members in enumerate(clusters):
            labels[members] = label
        score = silhouette(d, labels)
        if score > best + 1e-12:
            best_k, best = len(clusters), score
    return best_k


@pytest.mark.parametrize("seed", range(6))
def test_silhouette_k_in_one_pass_equals_scoring_every_cut(seed):
    # Integer points make tied merge heights, where fcluster's maxclust gives fewer clusters
    # than asked; repeated points make zero distances.
    rng = np.random.default_rng(seed)
    for trial in range(30):
        n = int(rng.integers(3, 30))
        x = rng.normal(size=(n, 3))
        if trial % 3 == 0:
            x = np.round(x)
        if trial % 4 == 0:
            x = np.repeat(x[: max(1, n // 3)], 3, axis=0)[:n]
        d = np.abs(x[:, None] - x[None]).sum(-1)
        tree = average_linkage(d)
        assert silhouette_k(d, tree) == _silhouette_k_from_scratch(d, tree)


def test_silhouette_k_finds_planted_groups_among_many_clients():
    # 600 clients in 7 tight groups: K = 7, found without scoring 600 cuts from scratch.
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=10.0, size=(7, 4))
    x = centres[np.arange(600) % 7] + rng.normal(scale=0.1, size=(600, 4))
    d = np.abs(x[:, None] - x[None]).sum(-1)
    assert silhouette_k(d, average_linkage(d)) == 7
