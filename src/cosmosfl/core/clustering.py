"""Clustering clients by the similarity of their pseudo-labels (paper section 4.1, Algorithm 1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DISTANCES = ("l1", "l2")


def pairwise_distances(probs: Sequence[np.ndarray], metric: str = "l1") -> np.ndarray:
    """Distances d(i, j) between clients' pseudo-label matrices f_i(U), each of shape (n, M).

    "l1" is the paper's ℓ1 distance divided by n: the mean per-sample ℓ1 distance, in [0, 2]
    for probability rows, so one threshold works for any |U|. "l2" is the mean per-sample
    Euclidean distance (the official code used an un-normalised Frobenius norm).
    """
    if metric not in DISTANCES:
        raise ValueError(f"distance {metric!r} is not supported; allowed: {', '.join(DISTANCES)}")
    if len(probs) == 0:
        return np.zeros((0, 0))
    stacked = np.stack([np.asarray(p, dtype=np.float64) for p in probs])
    if stacked.ndim != 3:
        raise ValueError(f"each pseudo-label matrix must be 2-D (n, M); got {stacked.shape[1:]}")
    n_clients = stacked.shape[0]
    out = np.zeros((n_clients, n_clients))
    # One row at a time keeps memory at O(N·n·M) instead of O(N²·n·M).
    for i in range(n_clients):
        diff = stacked[i + 1 :] - stacked[i]
        if metric == "l1":
            d = np.abs(diff).sum(axis=2).mean(axis=1)
        else:
            d = np.sqrt((diff**2).sum(axis=2)).mean(axis=1)
        out[i, i + 1 :] = d
        out[i + 1 :, i] = d
    return out


def _check_distances(distances: np.ndarray) -> np.ndarray:
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"distances must be a square matrix, got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("distances contain NaN or inf")
    if not np.allclose(d, d.T):
        raise ValueError("distances must be symmetric")
    return d


def greedy_clustering(distances: np.ndarray, threshold: float) -> list[list[int]]:
    """Algorithm 1 (greedy clustering) with threshold B0.

    While clients remain: take the remaining client with the most B0-close remaining neighbours
    (ties: lowest index), make it and those neighbours a cluster, remove them. Returns clusters
    as sorted index lists, in the order they were formed; K = len(result) is an output.
    """
    d = _check_distances(distances)
    if not np.isfinite(threshold) or threshold < 0:
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold}")
    n = d.shape[0]
    close = d <= threshold
    np.fill_diagonal(close, False)
    remaining = np.ones(n, dtype=bool)
    clusters: list[list[int]] = []
    while remaining.any():
        counts = np.where(remaining, (close & remaining[None, :]).sum(axis=1), -1)
        center = int(np.argmax(counts))  # argmax returns the lowest index among ties
        members = remaining & close[center]
        members[center] = True
        clusters.append([int(i) for i in np.flatnonzero(members)])
        remaining &= ~members
    return clusters


def threshold_for_clusters(distances: np.ndarray, k: int) -> float:
    """The smallest threshold B0 for which Algorithm 1 yields at most `k` clusters.

    Exact: the clustering only changes when B0 crosses a pairwise distance, so the candidates
    are 0 and the distinct off-diagonal distances; K is not monotone in B0 in general, so every
    candidate is tried in increasing order and the first that gives K <= k is returned.
    """
    d = _check_distances(distances)
    n = d.shape[0]
    if k < 1:
        raise ValueError(f"target number of clusters must be >= 1, got {k}")
    if n == 0:
        return 0.0
    candidates = np.unique(np.concatenate([[0.0], d[np.triu_indices(n, 1)]]))
    for b in candidates:
        if len(greedy_clustering(d, float(b))) <= k:
            return float(b)
    # Unreachable: at the largest distance every client is close to every other (K = 1).
    return float(candidates[-1])


def assignment_from_clusters(clusters: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """π: the cluster index of each of n clients."""
    out = np.full(n, -1, dtype=np.int64)
    for k, members in enumerate(clusters):
        out[list(members)] = k
    if (out < 0).any():
        raise ValueError(f"clients {np.flatnonzero(out < 0).tolist()} are in no cluster")
    return out
