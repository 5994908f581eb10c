"""The one k-means helper (core/kmeans.py) and the two algorithms that use it: each gives the
clusters it gave before it used the helper, for the seeds that reach it."""

import numpy as np
import pytest
from sklearn.cluster import KMeans

from cosmosfl.algorithms.comet import kmeans_clusters as comet_kmeans
from cosmosfl.algorithms.pfedck import cluster_updates
from cosmosfl.core.kmeans import kmeans_clusters
from cosmosfl.core.seeds import derive_seed


def _first_appearance(ids, labels):
    order = {}
    for label in labels:
        order.setdefault(int(label), len(order))
    return {c: order[int(label)] for c, label in zip(ids, labels, strict=True)}


def _rows(seed, n=9, d=12, dtype=np.float64):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d)) * 3
    return {c: (centres[c % 3] + rng.normal(size=d)).astype(dtype) for c in range(n)}


# The seeds COMET and pFedCK draw: derive_seed(run seed, name, round), 63 bits.
SEEDS = [derive_seed(s, name, t) for s in (0, 1, 7) for name in ("comet", "pfedck") for t in (1, 2)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_equals_scikit_learns_kmeans_with_the_seed_reduced_to_32_bits(seed, dtype):
    rows = _rows(seed % 1000, dtype=dtype)
    ids = sorted(rows)
    x = np.stack([rows[c] for c in ids])
    labels = KMeans(n_clusters=4, n_init=10, random_state=seed % 2**32).fit_predict(x)
    assert kmeans_clusters(rows, 4, seed) == _first_appearance(ids, labels)


def test_clusters_are_numbered_by_their_smallest_member():
    rows = {5: np.zeros(2), 2: np.ones(2) * 10, 9: np.zeros(2) + 0.1, 3: np.ones(2) * 10.1}
    assert kmeans_clusters(rows, 2, 0) == {2: 0, 3: 0, 5: 1, 9: 1}
    assert kmeans_clusters(rows, 1, 0) == dict.fromkeys([2, 3, 5, 9], 0)
    with pytest.raises(ValueError, match=r"k must lie in \[1, 4\]"):
        kmeans_clusters(rows, 5, 0)


# What COMET and pFedCK computed before the helper existed (copied from the old modules).
def _old_comet(probs, k, seed):
    ids = sorted(probs)
    x = np.stack([np.asarray(probs[c], dtype=np.float64).ravel() for c in ids])
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed % 2**32).fit_predict(x)
    return _first_appearance(ids, labels)


def _old_pfedck(deltas, num_clusters, seed):
    ids = sorted(deltas)
    k = min(num_clusters, len(ids))
    if k <= 1:
        return dict.fromkeys(ids, 0)
    x = np.stack([np.concatenate([a.ravel() for a in deltas[c].values()]) for c in ids])
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed % 2**31).fit_predict(x)
    return _first_appearance(ids, labels)


@pytest.mark.parametrize("seed", SEEDS)
def test_comet_and_pfedck_cluster_as_before(seed):
    probs = {c: np.abs(v.reshape(3, 4)) for c, v in _rows(seed % 997).items()}
    assert comet_kmeans(probs, 3, seed) == _old_comet(probs, 3, seed)
    deltas = {
        c: {"w": v[:8].astype(np.float32), "b": v[8:].astype(np.float32)}
        for c, v in _rows(seed % 991).items()
    }
    # pFedCK reduces its seeds to 31 bits before the helper, as it always did.
    for k in (1, 3, 20):
        assert cluster_updates(deltas, k, seed % 2**31) == _old_pfedck(deltas, k, seed)
    assert cluster_updates({}, 3, 0) == {}
