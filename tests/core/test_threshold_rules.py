"""B0 rules that choose K from the distances alone (largest gap, widest interval)."""

import numpy as np
import pytest

from cosmosfl.core.clustering import (
    greedy_clustering,
    largest_gap_threshold,
    threshold_for_clusters,
    widest_interval_threshold,
)


def grouped(sizes, within, between, noise=0.0, seed=0):
    """Distances of clients in groups: `within` inside a group, `between` across, plus noise."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    d = np.where(labels[:, None] == labels[None, :], within, between).astype(float)
    d = d + rng.uniform(0, noise, d.shape)
    d = np.triu(d, 1)
    return d + d.T, labels


def same_partition(clusters, labels):
    return sorted(sorted(c) for c in clusters) == sorted(
        sorted(np.flatnonzero(labels == g).tolist()) for g in np.unique(labels)
    )


@pytest.mark.parametrize("rule", [largest_gap_threshold, widest_interval_threshold])
def test_rules_find_the_groups_without_being_told_k(rule):
    for k in (2, 3, 7):
        d, labels = grouped([4] * k, within=0.2, between=1.2, noise=0.1, seed=k)
        b0 = rule(d)
        assert same_partition(greedy_clustering(d, b0), labels), (k, b0)


def test_widest_interval_is_not_fooled_where_a_searched_k_merges_groups():
    # 7 true groups; the paper's rule with target 5 must merge some of them, the endogenous
    # rules keep them apart.
    d, labels = grouped([3] * 7, within=0.3, between=1.0, noise=0.2, seed=1)
    merged = greedy_clustering(d, threshold_for_clusters(d, 5))
    assert len(merged) <= 5 and not same_partition(merged, labels)
    assert same_partition(greedy_clustering(d, widest_interval_threshold(d)), labels)


def test_hand_computed_largest_gap():
    d = np.array(
        [[0, 0.1, 0.5, 0.6], [0.1, 0, 0.55, 0.65], [0.5, 0.55, 0, 0.15], [0.6, 0.65, 0.15, 0]]
    )
    # distinct distances 0.1, 0.15, 0.5, 0.55, 0.6, 0.65: the widest gap is 0.15 -> 0.5
    assert largest_gap_threshold(d) == pytest.approx(0.15)
    assert widest_interval_threshold(d) == pytest.approx(0.15)  # [[0, 1], [2, 3]] on [0.15, 0.5)


def test_degenerate_inputs():
    assert largest_gap_threshold(np.zeros((1, 1))) == 0.0
    assert widest_interval_threshold(np.zeros((1, 1))) == 0.0
    with pytest.raises(ValueError, match="largest-gap"):
        widest_interval_threshold(np.ones((5, 5)) - np.eye(5), max_clients=4)
