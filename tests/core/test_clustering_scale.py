"""The scalable clustering paths: blocked distances equal the plain formula, sampled distances
equal the formula on the sampled rows, the O(N²) greedy equals Algorithm 1 as written, the
threshold searches agree on separated groups, and the approximate mode finds planted groups."""

import numpy as np
import pytest

from cosmosfl.bench.clustering import PlantedLabels
from cosmosfl.core.clustering import (
    assignment_from_clusters,
    greedy_clustering,
    pairwise_distances,
    sample_rows,
    threshold_for_clusters,
)


def reference(probs, metric="l1"):
    p = np.stack(probs).astype(np.float64)
    diff = p[:, None] - p[None, :]
    if metric == "l1":
        return np.abs(diff).sum(axis=3).mean(axis=2)
    return np.sqrt((diff**2).sum(axis=3)).mean(axis=2)


def random_probs(n_clients=7, n=40, m=5, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.ones(m), n).astype(np.float32) for _ in range(n_clients)]


@pytest.mark.parametrize("metric", ["l1", "l2"])
@pytest.mark.parametrize("block_bytes", [64, 1000, 1 << 27])
def test_blocked_distances_equal_the_formula(metric, block_bytes):
    p = random_probs()
    d = pairwise_distances(p, metric, block_bytes=block_bytes)
    np.testing.assert_allclose(d, reference(p, metric), rtol=1e-12, atol=1e-12)
    assert (np.diag(d) == 0).all() and (d == d.T).all()


def test_sampled_distances_are_the_formula_on_the_sampled_rows():
    p = random_probs(n=200)
    rows = sample_rows(200, 30, seed=5)
    assert len(rows) == 30 and len(set(rows.tolist())) == 30
    d = pairwise_distances(p, sample=30, seed=5)
    np.testing.assert_allclose(d, reference([q[rows] for q in p]), rtol=1e-12)
    # A sample as large as U is the exact distance.
    np.testing.assert_allclose(pairwise_distances(p, sample=500), reference(p), rtol=1e-12)
    with pytest.raises(ValueError, match="distance_sample"):
        pairwise_distances(p, sample=0)


def test_shapes_must_agree():
    p = random_probs()
    p[3] = p[3][:-1]
    with pytest.raises(ValueError, match="differ in shape"):
        pairwise_distances(p)


def naive_greedy(d, b):
    """Algorithm 1 exactly as the paper states it (recounting every iteration)."""
    close = d <= b
    np.fill_diagonal(close, False)
    remaining = np.ones(len(d), bool)
    out = []
    while remaining.any():
        counts = np.where(remaining, (close & remaining[None, :]).sum(axis=1), -1)
        c = int(np.argmax(counts))
        members = remaining & close[c]
        members[c] = True
        out.append(np.flatnonzero(members).tolist())
        remaining &= ~members
    return out


def test_incremental_greedy_equals_algorithm_1():
    rng = np.random.default_rng(4)
    for _ in range(100):
        n = int(rng.integers(1, 25))
        d = np.round(rng.uniform(0, 2, (n, n)), 1)  # coarse values: many ties
        d = np.triu(d, 1)
        d = d + d.T
        b = float(rng.choice([0.0, 0.3, 0.7, 1.0, 1.5]))
        assert greedy_clustering(d, b) == naive_greedy(d, b)


def planted(n_clients, n_public=400, seed=0):
    labels = PlantedLabels(n_clients, n_public=n_public, groups=4, seed=seed)
    return [np.asarray(labels[i], dtype=np.float32) for i in range(n_clients)], labels.groups


def test_bisect_and_scan_agree_on_planted_groups():
    probs, groups = planted(24)
    d = pairwise_distances(probs)
    scan, bisect = threshold_for_clusters(d, 4, "scan"), threshold_for_clusters(d, 4, "bisect")
    assert scan == bisect
    assert threshold_for_clusters(d, 4, "auto") == scan  # 24 clients: auto scans
    found = assignment_from_clusters(greedy_clustering(d, scan), 24)
    same = groups[:, None] == groups[None, :]
    assert ((found[:, None] == found[None, :]) == same).all()


def test_bisect_always_reaches_at_most_k_clusters():
    rng = np.random.default_rng(6)
    for _ in range(30):
        n = int(rng.integers(2, 15))
        d = np.round(rng.uniform(0, 2, (n, n)), 2)
        d = np.triu(d, 1)
        d = d + d.T
        for k in range(1, n + 1):
            b = threshold_for_clusters(d, k, "bisect")
            assert len(greedy_clustering(d, b)) <= k
            assert b >= threshold_for_clusters(d, k, "scan")
    with pytest.raises(ValueError, match="threshold_search"):
        threshold_for_clusters(d, 1, "fast")


def test_approximate_clustering_agrees_with_exact_on_planted_groups():
    probs, groups = planted(40, n_public=2000)
    exact = pairwise_distances(probs)
    approx = pairwise_distances(probs, sample=64, seed=1)
    clusters = [
        assignment_from_clusters(greedy_clustering(d, threshold_for_clusters(d, 4)), 40)
        for d in (exact, approx)
    ]
    same = groups[:, None] == groups[None, :]
    for found in clusters:
        assert ((found[:, None] == found[None, :]) == same).all()


def test_lazy_label_sources_only_produce_sampled_rows():
    labels = PlantedLabels(6, n_public=300, groups=2)
    full = [np.asarray(labels[i], dtype=np.float64) for i in range(6)]
    rows = sample_rows(300, 20, seed=2)
    # Rows drawn on demand equal those rows of the full matrix...
    np.testing.assert_allclose(labels[3][rows], full[3][rows])
    # ...so the sampled distance from the lazy source equals the one from full arrays.
    np.testing.assert_allclose(
        pairwise_distances(labels, sample=20, seed=2), pairwise_distances(full, sample=20, seed=2)
    )


def test_stable_threshold_is_where_the_partition_changes():
    from cosmosfl.core.clustering import stable_threshold

    # Two tight pairs far apart: {0, 1} at 0.1, {2, 3} at 0.2, the groups 1.0-1.3 apart.
    d = np.array([[0, 0.1, 1.0, 1.1], [0.1, 0, 1.2, 1.3], [1.0, 1.2, 0, 0.2], [1.1, 1.3, 0.2, 0]])
    b0 = threshold_for_clusters(d, 2)
    assert b0 == 0.2
    # Every B0 in [0.2, 1.0) gives {0, 1}, {2, 3}; at 1.0 the groups merge.
    assert stable_threshold(d, b0) == 1.0
    assert stable_threshold(d, 1.3) == float("inf")
    # From B0 = 0 (singletons) the first change is the closest pair merging.
    assert stable_threshold(d, 0.0) == 0.1


def test_nearly_symmetric_distances_are_symmetrised_before_clustering():
    rng = np.random.default_rng(0)
    d = rng.random((12, 12))
    d = (d + d.T) / 2
    np.fill_diagonal(d, 0)
    noisy = d + np.triu(np.full_like(d, 1e-12), 1)  # symmetric within rounding only
    assert greedy_clustering(noisy, 0.4) == greedy_clustering((noisy + noisy.T) / 2, 0.4)
    assert threshold_for_clusters(noisy, 3) == threshold_for_clusters((noisy + noisy.T) / 2, 3)
