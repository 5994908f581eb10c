import numpy as np
import pytest

from cosmosfl.core.clustering import (
    assignment_from_clusters,
    greedy_clustering,
    pairwise_distances,
    threshold_for_clusters,
)


def sym(rows):
    d = np.array(rows, dtype=float)
    return np.maximum(d, d.T)


def test_two_obvious_groups():
    d = sym([[0, 0.1, 0.9, 0.9], [0, 0, 0.9, 0.9], [0, 0, 0, 0.2], [0, 0, 0, 0]])
    assert greedy_clustering(d, 0.5) == [[0, 1], [2, 3]]


def test_picks_client_with_most_close_neighbours_first():
    # Client 2 is close to 1, 3 and 4; client 0 only to 1. Algorithm 1 must start at 2.
    d = np.full((5, 5), 1.0)
    np.fill_diagonal(d, 0)
    for i, j in [(0, 1), (1, 2), (2, 3), (2, 4)]:
        d[i, j] = d[j, i] = 0.1
    assert greedy_clustering(d, 0.5) == [[1, 2, 3, 4], [0]]


def test_ties_broken_by_lowest_id():
    # 0-1 and 2-3 are two disjoint close pairs: every client has one neighbour.
    d = sym([[0, 0.1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0.1], [0, 0, 0, 0]])
    clusters = greedy_clustering(d, 0.5)
    assert clusters[0] == [0, 1]
    # A chain 0-1-2: clients 0 and 2 have one neighbour, 1 has two -> 1 first with everyone.
    chain = sym([[0, 0.1, 1], [0, 0, 0.1], [0, 0, 0]])
    assert greedy_clustering(chain, 0.5) == [[0, 1, 2]]
    # Equal counts and no structure: client 0 is the centre.
    flat = np.full((3, 3), 0.3)
    np.fill_diagonal(flat, 0)
    assert greedy_clustering(flat, 0.3) == [[0, 1, 2]]


def test_neighbours_are_only_those_of_the_centre():
    # 0-1 close, 1-2 close, 0-2 far: centre 1 takes both 0 and 2 (distance to centre only).
    d = sym([[0, 0.2, 0.9], [0, 0, 0.2], [0, 0, 0]])
    assert greedy_clustering(d, 0.3) == [[0, 1, 2]]


def test_threshold_zero_gives_singletons_unless_identical():
    d = sym([[0, 0.1, 0.2], [0, 0, 0.3], [0, 0, 0]])
    assert greedy_clustering(d, 0.0) == [[0], [1], [2]]
    d2 = sym([[0, 0.0, 0.2], [0, 0, 0.3], [0, 0, 0]])
    assert greedy_clustering(d2, 0.0) == [[0, 1], [2]]


def test_threshold_above_every_distance_gives_one_cluster():
    rng = np.random.default_rng(0)
    d = rng.uniform(0, 2, (6, 6))
    d = np.triu(d, 1)
    d = d + d.T
    assert greedy_clustering(d, 2.5) == [list(range(6))]


def test_single_client_and_empty():
    assert greedy_clustering(np.zeros((1, 1)), 0.1) == [[0]]
    assert greedy_clustering(np.zeros((0, 0)), 0.1) == []


def test_clusters_partition_clients_for_random_inputs():
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(1, 12))
        d = rng.uniform(0, 2, (n, n))
        d = np.triu(d, 1)
        d = d + d.T
        b = float(rng.uniform(0, 2))
        clusters = greedy_clustering(d, b)
        flat = sorted(i for c in clusters for i in c)
        assert flat == list(range(n))
        for c in clusters:
            # Every member is within B0 of some member that is within B0 of all (the centre).
            sub = d[np.ix_(c, c)]
            assert ((sub <= b) | np.eye(len(c), dtype=bool)).all(axis=1).any()


def test_invalid_inputs():
    with pytest.raises(ValueError, match="square"):
        greedy_clustering(np.zeros((2, 3)), 0.1)
    with pytest.raises(ValueError, match="symmetric"):
        greedy_clustering(np.array([[0, 1.0], [0.5, 0]]), 0.1)
    with pytest.raises(ValueError, match="threshold"):
        greedy_clustering(np.zeros((2, 2)), -1)
    with pytest.raises(ValueError, match="NaN"):
        greedy_clustering(np.array([[0, np.nan], [np.nan, 0]]), 0.1)


GRID = np.arange(0, 2.01, 0.005)  # finer than the 0.01 spacing of the distances below


def test_threshold_for_clusters_is_smallest_for_each_k():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(2, 10))
        d = np.round(rng.uniform(0, 2, (n, n)), 2)
        d = np.triu(d, 1)
        d = d + d.T
        for k in range(1, n + 1):
            b = threshold_for_clusters(d, k)
            assert len(greedy_clustering(d, b)) <= k
            # No smaller threshold works: check a grid independent of the candidate set.
            assert all(len(greedy_clustering(d, g)) > k for g in GRID if g < b)
            if b > 0:
                assert len(greedy_clustering(d, np.nextafter(b, 0))) > k


def test_threshold_for_clusters_on_group_structure():
    # Three tight groups far apart: k=3 needs only the within-group distance.
    d = np.full((6, 6), 1.5)
    for g in ([0, 1], [2, 3], [4, 5]):
        d[np.ix_(g, g)] = 0.2
    np.fill_diagonal(d, 0)
    assert threshold_for_clusters(d, 3) == pytest.approx(0.2)
    assert threshold_for_clusters(d, 6) == 0.0
    assert threshold_for_clusters(d, 1) == pytest.approx(1.5)
    with pytest.raises(ValueError, match=">= 1"):
        threshold_for_clusters(d, 0)


def test_pairwise_l1_is_mean_per_sample_and_scale_free():
    a = np.array([[1.0, 0.0], [0.5, 0.5]])
    b = np.array([[0.0, 1.0], [0.5, 0.5]])
    d = pairwise_distances([a, b, a], "l1")
    assert d[0, 1] == pytest.approx((2.0 + 0.0) / 2)
    assert d[0, 2] == 0.0
    assert np.allclose(d, d.T)
    # Repeating U's rows does not change the distance (divided by n).
    d2 = pairwise_distances([np.vstack([a, a]), np.vstack([b, b])], "l1")
    assert d2[0, 1] == pytest.approx(d[0, 1])
    l2 = pairwise_distances([a, b], "l2")
    assert l2[0, 1] == pytest.approx(np.sqrt(2) / 2)
    with pytest.raises(ValueError, match="allowed"):
        pairwise_distances([a, b], "cosine")


def test_l1_distance_bounded_by_two_on_simplex():
    rng = np.random.default_rng(3)
    p = [rng.dirichlet(np.ones(5), 50) for _ in range(4)]
    d = pairwise_distances(p)
    assert (d >= 0).all() and (d <= 2).all()


def test_assignment_from_clusters():
    pi = assignment_from_clusters([[1, 2], [0]], 3)
    assert pi.tolist() == [1, 0, 0]
    with pytest.raises(ValueError, match="no cluster"):
        assignment_from_clusters([[0]], 2)
