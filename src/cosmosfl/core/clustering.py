"""Clustering clients by the similarity of their pseudo-labels (paper section 4.1, Algorithm 1):
the greedy clustering at a threshold B0, the search for B0 and the rules that choose it. The
distances themselves are core/distances.py's (re-exported here, where they were first)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cosmosfl.core.distances import (  # noqa: F401 (re-exported: their old import path)
    BLOCK_BYTES,
    CHANCE_PERMUTATIONS,
    DISTANCE_BACKENDS,
    DISTANCES,
    NUMBA_MIN_WORK,
    chance_corrected_l1,
    pairwise_distances,
    resolve_backend,
    sample_rows,
)

THRESHOLD_SEARCHES = ("auto", "scan", "bisect")
# How COSMOS chooses B0 when the user does not fix it: "target" (the paper's tuning and the
# official code's: the smallest B0 giving K <= target_clusters), or rules that pick K from the
# distances alone: "largest-gap" (B0 at the lower end of the widest gap between consecutive
# pairwise distances) and "widest-interval" (the partition that stays the same over the widest
# range of B0, trivial ones excluded).
THRESHOLD_RULES = ("target", "largest-gap", "widest-interval", "silhouette")
# "auto" scans every candidate B0 (exact smallest) up to this many clients, and bisects above.
SCAN_MAX_CLIENTS = 200


def _check_distances(distances: np.ndarray) -> np.ndarray:
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"distances must be a square matrix, got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("distances contain NaN or inf")
    # Row blocks keep the temporaries small for N in the tens of thousands.
    step = max(1, (16 << 20) // max(d.shape[0], 1))
    exact = True
    for i in range(0, d.shape[0], step):
        block, mirror = d[i : i + step], d[:, i : i + step].T
        if not np.allclose(block, mirror):
            raise ValueError("distances must be symmetric")
        exact = exact and np.array_equal(block, mirror)
    # Symmetric only within rounding: average it once, since _greedy's count updates read
    # rows of the closeness matrix and must see the same closeness from both sides.
    return d if exact else (d + d.T) / 2


def _greedy(close: np.ndarray, limit: int | None = None) -> list[list[int]]:
    """Algorithm 1 on a boolean 'B0-close' matrix (diagonal False). With `limit`, stop as soon
    as more than `limit` clusters exist (all a threshold search needs to know)."""
    n = close.shape[0]
    remaining = np.ones(n, dtype=bool)
    # Close remaining neighbours of every client, updated as clusters are removed: O(N²) in
    # total instead of O(N²) per cluster.
    counts = close.sum(axis=1, dtype=np.int64)
    clusters: list[list[int]] = []
    while remaining.any():
        if limit is not None and len(clusters) > limit:
            break
        center = int(np.argmax(np.where(remaining, counts, -1)))  # lowest index among ties
        members = remaining & close[center]
        members[center] = True
        index = np.flatnonzero(members)
        clusters.append([int(i) for i in index])
        remaining &= ~members
        # close is symmetric: rows instead of columns, so the gather reads contiguous memory.
        counts -= close[index].sum(axis=0, dtype=np.int64)
    return clusters


def greedy_clustering(distances: np.ndarray, threshold: float) -> list[list[int]]:
    """Algorithm 1 (greedy clustering) with threshold B0.

    While clients remain: take the remaining client with the most B0-close remaining neighbours
    (ties: lowest index), make it and those neighbours a cluster, remove them. Returns clusters
    as sorted index lists, in the order they were formed; K = len(result) is an output.
    """
    d = _check_distances(distances)
    if not np.isfinite(threshold) or threshold < 0:
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold}")
    return _greedy(_close(d, threshold))


def _close(d: np.ndarray, b: float) -> np.ndarray:
    close = d <= b  # d is exactly symmetric (_check_distances)
    np.fill_diagonal(close, False)
    return close


def _clusters_at(d: np.ndarray, b: float, k: int) -> int:
    return len(_greedy(_close(d, b), limit=k))


def _components_bound(d: np.ndarray, k: int) -> float:
    """The smallest B0 at which the B0-close graph has at most k connected components.

    Every greedy cluster is connected in that graph, so K(B0) >= components(B0): no smaller
    threshold can give K <= k. It is the (N-k)-th smallest edge of a minimum spanning tree
    (Prim's algorithm, O(N²)).
    """
    n = d.shape[0]
    if k >= n:
        return 0.0
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = d[0].copy()
    edges = np.empty(n - 1)
    for e in range(n - 1):
        j = int(np.argmin(np.where(in_tree, np.inf, best)))
        edges[e] = best[j]
        in_tree[j] = True
        np.minimum(best, d[j], out=best)
    return float(np.sort(edges)[n - k - 1])


def threshold_for_clusters(distances: np.ndarray, k: int, search: str = "scan") -> float:
    """A threshold B0 for which Algorithm 1 yields at most `k` clusters.

    "scan" (exact): the smallest such B0. The clustering only changes when B0 crosses a
    pairwise distance, so the candidates are 0 and the distinct off-diagonal distances; K is
    not monotone in B0 in general, so candidates are tried in increasing order from a proven
    lower bound (connected components) and the first that gives K <= k is returned.
    "bisect": bisection over the same candidates, O(log N) clusterings instead of up to N²/2;
    it returns a B0 that gives K <= k, the smallest one whenever K is monotone around it (true
    for well-separated groups; otherwise possibly a larger one). "auto": scan for up to
    SCAN_MAX_CLIENTS clients, bisect above.
    """
    if search not in THRESHOLD_SEARCHES:
        raise ValueError(
            f"b0_search {search!r} is not supported; allowed: {', '.join(THRESHOLD_SEARCHES)}"
        )
    d = _check_distances(distances)
    n = d.shape[0]
    if k < 1:
        raise ValueError(f"target number of clusters must be >= 1, got {k}")
    if n == 0:
        return 0.0
    if search == "auto":
        search = "scan" if n <= SCAN_MAX_CLIENTS else "bisect"
    # Row slices instead of np.triu_indices: no 2 x N²/2 index arrays for large N.
    candidates = np.unique(np.concatenate([[0.0], *(d[i, i + 1 :] for i in range(n - 1))]))
    lo = int(np.searchsorted(candidates, _components_bound(d, k)))
    if search == "scan":
        for b in candidates[lo:]:
            if _clusters_at(d, float(b), k) <= k:
                return float(b)
        # Unreachable: at the largest distance every client is close to every other (K = 1).
        return float(candidates[-1])
    hi = len(candidates) - 1  # K = 1 there
    while lo < hi:
        mid = (lo + hi) // 2
        if _clusters_at(d, float(candidates[mid]), k) <= k:
            hi = mid
        else:
            lo = mid + 1
    return float(candidates[hi])


def stable_threshold(distances: np.ndarray, threshold: float, max_trials: int = 200) -> float:
    """The smallest distance above `threshold` at which Algorithm 1's partition changes: every
    B0 in [threshold, result) gives the same clusters. inf if it never changes (K = 1).

    A threshold search returns the *smallest* B0 for its K, right at a within-group distance;
    this is the other end of the interval, usually where two groups would merge. Only the
    `max_trials` smallest candidates are tried (thousands of clients): if none changes the
    partition, the last one tried is returned (a lower bound of the true value).
    """
    d = _check_distances(distances)
    n = d.shape[0]
    base = sorted(sorted(c) for c in greedy_clustering(d, threshold))
    upper = np.concatenate([d[i, i + 1 :] for i in range(n - 1)]) if n > 1 else np.zeros(0)
    candidates = np.unique(upper[upper > threshold])
    for b in candidates[:max_trials]:
        if sorted(sorted(c) for c in greedy_clustering(d, float(b))) != base:
            return float(b)
    if len(candidates) > max_trials:
        return float(candidates[max_trials - 1])
    return float("inf")


def _upper(d: np.ndarray) -> np.ndarray:
    n = d.shape[0]
    return np.concatenate([d[i, i + 1 :] for i in range(n - 1)]) if n > 1 else np.zeros(0)


def largest_gap_threshold(distances: np.ndarray) -> float:
    """B0 just below the widest gap between consecutive distinct pairwise distances: within-
    group distances lie below it, between-group ones above, whatever K that gives."""
    d = _check_distances(distances)
    values = np.unique(_upper(d))
    if len(values) < 2:
        return float(values[0]) if len(values) else 0.0
    return float(values[int(np.argmax(np.diff(values)))])


def widest_interval_threshold(distances: np.ndarray, max_clients: int = 400) -> float:
    """The smallest B0 of the partition that Algorithm 1 returns over the widest range of B0.

    Algorithm 1's clusters only change when B0 crosses a pairwise distance, so the range of B0
    is cut into intervals of one partition each; the widest one (a persistence rule, as in
    hierarchical clustering) is chosen among partitions with 1 < K < N, so neither "everyone
    alone" nor "everyone together" wins by default. Exact, one clustering per distinct
    distance: O(N^4) in the worst case, so limited to `max_clients`.
    """
    d = _check_distances(distances)
    n = d.shape[0]
    if n > max_clients:
        raise ValueError(
            f"b0_rule 'widest-interval' tries every pairwise distance; {n} clients is "
            f"more than {max_clients}: use 'largest-gap' or 'target' for this many clients"
        )
    candidates = np.unique(np.concatenate([[0.0], _upper(d)]))
    best, best_width = 0.0, -1.0
    start, current = None, None
    for b in candidates:
        partition = sorted(sorted(c) for c in greedy_clustering(d, float(b)))
        if partition != current:
            nontrivial = current is not None and 1 < len(current) < n
            if nontrivial and start is not None and b - start > best_width:
                best, best_width = start, float(b - start)
            start, current = float(b), partition
    return best


def assignment_from_clusters(clusters: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """π: the cluster index of each of n clients."""
    out = np.full(n, -1, dtype=np.int64)
    for k, members in enumerate(clusters):
        out[list(members)] = k
    if (out < 0).any():
        raise ValueError(f"clients {np.flatnonzero(out < 0).tolist()} are in no cluster")
    return out
