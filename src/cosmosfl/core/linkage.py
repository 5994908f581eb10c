"""Average-linkage clustering of clients and the silhouette rule for K (a COSMOS extension).

Algorithm 1 (core/clustering.py) decides every membership by one threshold on single pairwise
distances. When pseudo-labels are noisy, within-group and between-group distances overlap and no
threshold separates the groups (docs/ablations.md, "Clustering"). Average linkage merges two
clusters by the mean of *all* their pairwise distances, so one unusually close or far pair does not
decide a merge; cutting its dendrogram at a height B0 is still threshold clustering ("merge while
the clusters' mean distance is at most B0"), and K stays an output.

The silhouette rule picks the cut (or Algorithm 1's B0) whose partition has the largest mean
silhouette (Rousseeuw 1987): how much closer each client is to its own cluster than to the
nearest other one, using the same distance matrix and nothing else (K is not given).
"""

from __future__ import annotations

import numpy as np

# scipy is imported where it is used: every Flower ClientApp message imports this module (via
# the algorithms) but never clusters, and scipy.cluster costs it about 0.3 s per message.

# Silhouette over every Algorithm 1 threshold runs one clustering per distinct pairwise distance.
SILHOUETTE_GREEDY_MAX_CLIENTS = 400
# The silhouette of a dendrogram's cuts is scored up to this many clusters: O(N K) per cut, so
# thousands of clients stay seconds; a partition finer than this is no clustering in practice.
SILHOUETTE_MAX_K = 200


def silhouette(distances: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of a partition under a precomputed distance matrix.

    s_i = (b_i - a_i) / max(a_i, b_i), with a_i the mean distance to the other members of i's
    cluster and b_i the smallest mean distance to another cluster; s_i = 0 for a client alone in
    its cluster. Undefined (ValueError) unless 2 <= K <= N - 1.
    """
    d = np.asarray(distances, dtype=np.float64)
    _, lab = np.unique(np.asarray(labels), return_inverse=True)
    n, k = len(lab), int(lab.max()) + 1 if len(lab) else 0
    if not 2 <= k <= n - 1:
        raise ValueError(f"the silhouette needs 2 <= K <= N - 1 clusters; got K={k}, N={n}")
    onehot = np.zeros((n, k))
    onehot[np.arange(n), lab] = 1.0
    sums, sizes = d @ onehot, onehot.sum(axis=0)
    own = sums[np.arange(n), lab]
    own_size = sizes[lab]
    a = np.where(own_size > 1, own / np.maximum(own_size - 1, 1), 0.0)
    means = sums / sizes
    means[np.arange(n), lab] = np.inf
    b = means.min(axis=1)
    denom = np.maximum(a, b)
    s = np.where((own_size > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
    return float(s.mean())


def average_linkage(distances: np.ndarray) -> np.ndarray:
    """The average-linkage (UPGMA) dendrogram of a symmetric distance matrix, scipy's format:
    row m merges two clusters at height Z[m, 2]; heights never decrease."""
    d = np.asarray(distances, dtype=np.float64)
    if d.shape[0] < 2:
        return np.zeros((0, 4))
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    return linkage(squareform(d, checks=False), method="average")


def _clusters(labels: np.ndarray) -> list[list[int]]:
    """Label vector -> sorted member lists, ordered by their smallest member (deterministic)."""
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(int(label), []).append(i)
    return sorted(groups.values(), key=lambda members: members[0])


def cut(tree: np.ndarray, n: int, k: int) -> list[list[int]]:
    """The dendrogram's partition into k clusters (fewer if merge heights tie at the cut)."""
    if n == 0:
        return []
    if n == 1 or k >= n:
        return [[i] for i in range(n)]
    from scipy.cluster.hierarchy import fcluster

    return _clusters(fcluster(tree, k, criterion="maxclust"))


def cut_at(tree: np.ndarray, n: int, threshold: float) -> list[list[int]]:
    """The partition at height `threshold`: clusters keep merging while their average distance
    is at most `threshold`."""
    if n < 2:
        return [[i] for i in range(n)]
    from scipy.cluster.hierarchy import fcluster

    return _clusters(fcluster(tree, threshold, criterion="distance"))


def heights_for(tree: np.ndarray, n: int, k: int) -> tuple[float, float]:
    """[lo, hi): the cut heights giving k clusters (lo: the last merge done, 0 for k = n; hi:
    the next merge, inf for k = 1)."""
    heights = tree[:, 2] if len(tree) else np.zeros(0)
    lo = float(heights[n - k - 1]) if k < n else 0.0
    hi = float(heights[n - k]) if k > 1 else float("inf")
    return lo, hi


def silhouette_k(distances: np.ndarray, tree: np.ndarray) -> int:
    """The number of clusters (2 ... min(N - 1, SILHOUETTE_MAX_K)) whose dendrogram cut has the
    largest silhouette; ties go to the smaller K. 1 for N < 3, where no such partition exists.

    One pass up the dendrogram: each merge adds one column of the clients' distance sums to
    another, so every cut is scored in O(N K) instead of O(N^2 K) from scratch.
    """
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    if n < 3:
        return 1
    heights = tree[:, 2]
    k_max = min(n - 1, SILHOUETTE_MAX_K)
    scores = _scores_up_the_tree(d, tree, first=n - k_max)
    best_k, best = 1, -np.inf
    for k in range(2, k_max + 1):
        # cut(tree, n, k) is fcluster's maxclust: every merge at a height <= the (n - k)-th
        # merge's, so merges tied at the cut join together and fewer clusters come out.
        merged = int(np.searchsorted(heights, heights[n - k - 1], side="right"))
        clusters = n - merged
        if not 2 <= clusters <= n - 1:
            continue
        if scores[merged] > best + 1e-12:
            best_k, best = clusters, scores[merged]
    return best_k


def _scores_up_the_tree(d: np.ndarray, tree: np.ndarray, first: int) -> dict[int, float]:
    """{m: silhouette of the partition after the dendrogram's first m merges}, m from `first`
    to N - 2."""
    n = d.shape[0]
    members: dict[int, list[int]] = {i: [i] for i in range(n)}
    for m in range(first):  # scipy's ids: leaves 0..n-1, merge m makes id n + m
        a, b = int(tree[m, 0]), int(tree[m, 1])
        members[n + m] = members.pop(a) + members.pop(b)
    column = {cid: c for c, cid in enumerate(members)}
    lab = np.empty(n, dtype=np.int64)
    for cid, idx in members.items():
        lab[idx] = column[cid]
    k = len(column)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), lab] = 1.0
    sums, sizes = d @ onehot, onehot.sum(axis=0)
    alive = np.ones(k, dtype=bool)
    rows = np.arange(n)
    scores: dict[int, float] = {}
    for m in range(first, n - 1):
        if m >= 1:
            scores[m] = _silhouette_from_sums(sums, sizes, lab, alive, rows)
        a, b = column.pop(int(tree[m, 0])), column.pop(int(tree[m, 1]))
        sums[:, a] += sums[:, b]
        sizes[a] += sizes[b]
        lab[lab == b] = a
        alive[b] = False
        column[n + m] = a
    return scores


def _silhouette_from_sums(
    sums: np.ndarray, sizes: np.ndarray, lab: np.ndarray, alive: np.ndarray, rows: np.ndarray
) -> float:
    """`silhouette` from each client's distance sums to every cluster (dead columns skipped)."""
    own = sums[rows, lab]
    own_size = sizes[lab]
    a = np.where(own_size > 1, own / np.maximum(own_size - 1, 1), 0.0)
    live = np.flatnonzero(alive)
    means = sums[:, live] / sizes[live]
    means[rows, np.searchsorted(live, lab)] = np.inf
    b = means.min(axis=1)
    denom = np.maximum(a, b)
    s = np.where((own_size > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
    return float(s.mean())


def widest_gap_k(tree: np.ndarray, n: int) -> int:
    """K whose range of cut heights is widest (1 < K < N): the dendrogram's largest gap between
    consecutive merges, the hierarchical form of both `largest-gap` and `widest-interval`."""
    if n < 3:
        return 1
    gaps = np.diff(tree[:, 2])  # gap m: between merge m and m + 1, i.e. K = n - m - 1
    return int(n - int(np.argmax(gaps)) - 1)


def silhouette_threshold(distances: np.ndarray, candidates: np.ndarray, partition) -> float:
    """The candidate threshold whose partition (partition(b) -> clusters) has the largest
    silhouette; ties: the smallest threshold. Candidates giving K = 1 or K = N are skipped;
    returns the first candidate if none is scorable."""
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    if n > SILHOUETTE_GREEDY_MAX_CLIENTS:
        raise ValueError(
            f"b0_rule 'silhouette' with Algorithm 1 tries every pairwise distance; {n} "
            f"clients is more than {SILHOUETTE_GREEDY_MAX_CLIENTS}: use clustering: "
            "average-linkage (one dendrogram) or b0_rule 'target' for this many clients"
        )
    best_b, best = float(candidates[0]) if len(candidates) else 0.0, -np.inf
    for b in candidates:
        clusters = partition(float(b))
        if not 2 <= len(clusters) <= n - 1:
            continue
        score = silhouette(d, _labels(clusters, n))
        if score > best + 1e-12:
            best_b, best = float(b), score
    return best_b


def _labels(clusters: list[list[int]], n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.int64)
    for k, members in enumerate(clusters):
        out[list(members)] = k
    return out
