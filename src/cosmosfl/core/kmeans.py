"""k-means on one vector per client, with cluster numbers that do not depend on k-means' label
order (COMET clusters soft-label matrices, pFedCK model updates)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def kmeans_clusters(rows: Mapping[int, np.ndarray], k: int, seed: int) -> dict[int, int]:
    """k-means of the clients' vectors `rows` (each flattened; dtype kept, so float32 input
    runs k-means in float32): {client id: cluster}.

    scikit-learn's KMeans with `n_init=10` and `random_state=seed % 2**32` (any int seed, e.g.
    a 63-bit `derive_seed`). Clusters are numbered in order of their smallest member id, so the
    numbering is stable under k-means' arbitrary label order. Needs 1 <= k <= len(rows); with
    k = 1 every client is in cluster 0 and k-means is not run.
    """
    ids = sorted(rows)
    if not 1 <= k <= len(ids):
        raise ValueError(f"k must lie in [1, {len(ids)}] (the number of clients), got {k}")
    if k == 1:
        return dict.fromkeys(ids, 0)
    from sklearn.cluster import KMeans  # imported here: the CLI starts without scikit-learn

    x = np.stack([np.asarray(rows[c]).ravel() for c in ids])
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed % 2**32).fit_predict(x)
    order: dict[int, int] = {}
    for label in labels:  # ids are sorted, so first appearance = smallest member id
        order.setdefault(int(label), len(order))
    return {cid: order[int(label)] for cid, label in zip(ids, labels, strict=True)}
