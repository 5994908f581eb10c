"""From a distance matrix to COSMOS's clusters: the clustering method and the rule for B0.

`greedy` is the paper's Algorithm 1 (core/clustering.py); `average-linkage` cuts an average-
linkage dendrogram instead (core/linkage.py), an extension for noisy pseudo-labels. Either way
B0 is fixed by the user or chosen by a rule, and K is an output unless the rule is `target`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosmosfl.core import linkage
from cosmosfl.core.clustering import (
    _check_distances,
    _upper,
    greedy_clustering,
    largest_gap_threshold,
    stable_threshold,
    threshold_for_clusters,
    widest_interval_threshold,
)

CLUSTERINGS = ("greedy", "average-linkage")


@dataclass(frozen=True)
class ClientClusters:
    clusters: list[list[int]]  # member indices, in the order the method forms them
    threshold: float  # B0 used (for average linkage: the lowest cut height of this partition)
    # How close a client added later must be to join a cluster (None: not computed). Greedy:
    # Algorithm 1's closeness to the nearest member; average linkage: mean distance to members.
    join: float | None


def choose_clusters(
    distances: np.ndarray,
    method: str = "greedy",
    rule: str = "target",
    threshold: float | None = None,
    target: int | None = None,
    search: str = "auto",
    need_join: bool = False,
) -> ClientClusters:
    """Cluster clients by `method`, with B0 = `threshold` if given, else chosen by `rule`:
    "target" (at most `target` clusters, the smallest such B0), "largest-gap",
    "widest-interval" or "silhouette" (K from the distances alone)."""
    if method not in CLUSTERINGS:
        raise ValueError(
            f"clustering {method!r} is not supported; allowed: {', '.join(CLUSTERINGS)}"
        )
    d = _check_distances(distances)
    n = d.shape[0]
    if method == "average-linkage":
        tree = linkage.average_linkage(d)
        if threshold is not None:
            clusters = linkage.cut_at(tree, n, threshold)
            lo, hi = float(threshold), linkage.heights_for(tree, n, len(clusters))[1]
        else:
            if rule == "target":
                k = min(int(target or 1), max(n, 1))
            elif rule == "silhouette":
                k = linkage.silhouette_k(d, tree)
            else:  # largest-gap and widest-interval coincide on a dendrogram
                k = linkage.widest_gap_k(tree, n)
            clusters = linkage.cut(tree, n, k)
            lo, hi = linkage.heights_for(tree, n, len(clusters))
        return ClientClusters(clusters, lo, hi)
    if threshold is not None:
        b0 = float(threshold)
    elif rule == "largest-gap":
        b0 = largest_gap_threshold(d)
    elif rule == "widest-interval":
        b0 = widest_interval_threshold(d)
    elif rule == "silhouette":
        candidates = np.unique(np.concatenate([[0.0], _upper(d)]))
        b0 = linkage.silhouette_threshold(d, candidates, lambda b: greedy_clustering(d, b))
    else:
        b0 = threshold_for_clusters(d, int(target or 1), search)
    clusters = greedy_clustering(d, b0)
    join = None
    if need_join:
        join = (
            b0
            if threshold is not None
            else stable_threshold(d, b0, max_trials=200 if n <= 200 else 20)
        )
    return ClientClusters(clusters, b0, join)
