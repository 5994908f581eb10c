"""Client clustering (core/clustering.py): Algorithm 1 (greedy) and its threshold search,
the pairwise distances, the B0 rules that choose K from the distances alone (largest gap,
widest interval), and the scalable paths: blocked distances equal the plain formula, sampled
distances equal the formula on the sampled rows, the O(N²) greedy equals Algorithm 1 as
written, the threshold searches agree on separated groups, and the approximate mode finds
planted groups."""

import numpy as np
import pytest

from cosmosfl.bench.clustering import PlantedLabels
from cosmosfl.core.clustering import (
    assignment_from_clusters,
    greedy_clustering,
    largest_gap_threshold,
    pairwise_distances,
    sample_rows,
    threshold_for_clusters,
    widest_interval_threshold,
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


# B0 rules that choose K from the distances alone (largest gap, widest interval).


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


# The scalable paths.


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
    with pytest.raises(ValueError, match="b0_search"):
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


# -- chance-corrected ℓ1 ("l1-chance") ----------------------------------------------------
def _group_labels(n=300, m=6, seed=0):
    """Two groups of clients: members of a group predict the same (noisy) function of the
    sample; the groups' functions are unrelated."""
    rng = np.random.default_rng(seed)
    truth = [rng.integers(0, m, n) for _ in range(2)]

    def member(g):
        logits = 4.0 * np.eye(m)[truth[g]] + rng.normal(0, 1, (n, m))
        e = np.exp(logits - logits.max(1, keepdims=True))
        return (e / e.sum(1, keepdims=True)).astype(np.float32)

    return [member(0), member(0), member(1), member(1)]


def test_chance_corrected_distance_is_the_ratio_to_shuffled_labels():
    p = _group_labels()
    d = pairwise_distances(p, "l1-chance", seed=3)
    assert (np.diag(d) == 0).all() and np.allclose(d, d.T)
    # Group mates agree sample by sample: far below chance; unrelated groups: about chance.
    assert d[0, 1] < 0.7 and d[2, 3] < 0.7
    assert 0.9 < d[0, 2] < 1.1 and 0.9 < d[1, 3] < 1.1
    # The ratio itself: observed ℓ1 over the ℓ1 to a shuffle of U's rows (a few shuffles).
    observed = reference(p)[0, 1]
    shuffled = np.mean(
        [np.abs(p[0] - p[1][np.random.default_rng(s).permutation(300)]).sum(1).mean()
         for s in range(20)]
    )  # fmt: skip
    assert d[0, 1] == pytest.approx(observed / shuffled, rel=0.05)


def test_labels_that_ignore_the_sample_are_at_chance_from_everyone():
    p = _group_labels()
    n, m = p[0].shape
    constant = np.zeros((n, m), np.float32)
    constant[:, 0] = 1.0  # a `fixed` Byzantine client
    noise = np.random.default_rng(9).dirichlet(np.ones(m), n).astype(np.float32)  # `random`
    # Whatever its class frequencies, a client whose labels ignore the sample is at chance.
    d = pairwise_distances([*p, constant, constant.copy(), noise], "l1-chance", seed=1)
    np.testing.assert_allclose(d[4, :4], 1.0, atol=1e-9)  # shuffling a constant changes nothing
    assert d[4, 5] == 1.0  # two identical constants: agreement that says nothing
    assert np.all(np.abs(d[6, :4] - 1.0) < 0.1)


def test_chance_corrected_distance_is_seeded_and_validated():
    p = _group_labels(n=120)
    a = pairwise_distances(p, "l1-chance", seed=5)
    np.testing.assert_array_equal(a, pairwise_distances(p, "l1-chance", seed=5))
    assert not np.array_equal(a, pairwise_distances(p, "l1-chance", seed=6))
    # Blocks of U do not change the result (the same shuffles whatever the block size).
    np.testing.assert_allclose(
        a, pairwise_distances(p, "l1-chance", seed=5, block_bytes=256), rtol=1e-12
    )
    with pytest.raises(ValueError, match="numba backend computes l1 distances only"):
        pairwise_distances(p, "l1-chance", backend="numba")
