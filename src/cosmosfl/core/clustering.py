"""Clustering clients by the similarity of their pseudo-labels (paper section 4.1, Algorithm 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cosmosfl.core import l1_kernel

DISTANCES = ("l1", "l2", "l1-chance")
# "l1-chance": the ℓ1 distance relative to its value under chance, estimated with this many
# seeded permutations of the rows of U (see `chance_corrected_l1`).
CHANCE_PERMUTATIONS = 3
DISTANCE_BACKENDS = ("auto", "torch", "numba")
# "auto" uses the compiled ℓ1 kernel (when numba is installed) from this many absolute
# differences on: below it torch.cdist takes about a second, less than compiling the kernel,
# and the distances stay bit-identical to earlier versions for the usual federation sizes.
NUMBA_MIN_WORK = 2e9
THRESHOLD_SEARCHES = ("auto", "scan", "bisect")
# How COSMOS chooses B0 when the user does not fix it: "target" (the paper's tuning and the
# official code's: the smallest B0 giving K <= target_clusters), or rules that pick K from the
# distances alone: "largest-gap" (B0 at the lower end of the widest gap between consecutive
# pairwise distances) and "widest-interval" (the partition that stays the same over the widest
# range of B0, trivial ones excluded).
THRESHOLD_RULES = ("target", "largest-gap", "widest-interval", "silhouette")
# "auto" scans every candidate B0 (exact smallest) up to this many clients, and bisects above.
SCAN_MAX_CLIENTS = 200
# Memory for one block of stacked pseudo-labels (float64) while computing distances.
BLOCK_BYTES = 128 << 20


def _take_rows(p: Any, rows: np.ndarray | None) -> np.ndarray:
    # `p[rows]` rather than np.asarray(p)[rows]: a lazily generated label source only has to
    # produce the sampled rows (benchmarks with 10,000 clients rely on it).
    out = np.asarray(p if rows is None else p[rows], dtype=np.float64)
    if out.ndim != 2:
        raise ValueError(f"each pseudo-label matrix must be 2-D (n, M); got {out.shape}")
    return out


def _shape(p: Any) -> tuple[int, ...]:
    shape = getattr(p, "shape", None)
    return tuple(shape) if shape is not None else np.shape(p)


def sample_rows(n: int, sample: int | None, seed: int = 0) -> np.ndarray | None:
    """The rows of U used by the approximate distance (sorted), or None for all of U."""
    if sample is None or sample >= n:
        return None
    if sample < 1:
        raise ValueError(f"distance_sample must be >= 1 or None (all of U), got {sample}")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=int(sample), replace=False))


def pairwise_distances(
    probs: Sequence[Any],
    metric: str = "l1",
    *,
    sample: int | None = None,
    seed: int = 0,
    block_bytes: int = BLOCK_BYTES,
    backend: str = "auto",
) -> np.ndarray:
    """Distances d(i, j) between clients' pseudo-label matrices f_i(U), each of shape (n, M).

    "l1" is the paper's ℓ1 distance divided by n: the mean per-sample ℓ1 distance, in [0, 2]
    for probability rows, so one threshold works for any |U|. "l2" is the mean per-sample
    Euclidean distance (the official code used an un-normalised Frobenius norm). "l1-chance"
    is the ℓ1 distance relative to chance (`chance_corrected_l1`, an extension).

    Exact by default, computed in blocks of rows of U so memory stays near `block_bytes` plus
    the N x N result, whatever N and |U|. `sample` = s < |U| estimates the same quantity on s
    rows of U drawn with `seed` (an unbiased estimate of each d(i, j); the approximate mode
    for thousands of clients, where the exact cost N²·|U|·M is out of reach).

    `backend` (ℓ1 only): "torch" (torch.cdist, float64), "numba" (the compiled kernel of
    `cosmosfl.core.l1_kernel`, float32 block sums, ~8x faster, needs numba) or "auto" (numba
    when installed and the work N²/2·|U|·M is at least NUMBA_MIN_WORK, else torch).
    """
    if metric not in DISTANCES:
        raise ValueError(f"distance {metric!r} is not supported; allowed: {', '.join(DISTANCES)}")
    if backend not in DISTANCE_BACKENDS:
        raise ValueError(
            f"distance backend {backend!r} is not supported; allowed: "
            f"{', '.join(DISTANCE_BACKENDS)}"
        )
    if backend == "numba" and metric != "l1":
        raise ValueError(f"the numba backend computes l1 distances only, not {metric!r}")
    if backend == "numba" and not l1_kernel.available():
        raise ImportError(
            "the numba distance backend needs numba: pip install 'cosmosfl[fast]' "
            "(or use backend='torch')"
        )
    if metric == "l1-chance":
        return chance_corrected_l1(probs, sample=sample, seed=seed, block_bytes=block_bytes)
    n_clients = len(probs)
    if n_clients == 0:
        return np.zeros((0, 0))
    shape = _shape(probs[0])
    if len(shape) != 2:
        raise ValueError(f"each pseudo-label matrix must be 2-D (n, M); got {shape}")
    for i in range(1, n_clients):
        if _shape(probs[i]) != shape:
            raise ValueError(
                f"pseudo-label matrices differ in shape: {shape} and {_shape(probs[i])}"
            )
    n, m = shape
    rows = sample_rows(n, sample, seed)
    used = np.arange(n) if rows is None else rows
    if metric == "l1" and resolve_backend(n_clients, len(used), m, backend) == "numba":
        return _l1_numba(probs, rows, used, (n, m), block_bytes)
    # Rows of U per block: N clients x rows x M float64 values within the memory budget.
    step = max(1, int(block_bytes // (8 * m * n_clients)))
    total = torch.zeros((n_clients, n_clients), dtype=torch.float64)
    for start in range(0, len(used), step):
        chunk = used[start : start + step]
        rows_arg = chunk if rows is not None or len(chunk) < n else None
        block = torch.from_numpy(np.stack([_take_rows(p, rows_arg) for p in probs]))
        if metric == "l1":
            flat = block.reshape(n_clients, -1)
            total += _upper_blocks(lambda a, b: torch.cdist(a, b, p=1), flat, block_bytes)
        else:
            # Per-sample Euclidean norms, summed over samples: one distance matrix per row of U.
            per_row = block.transpose(0, 1)  # (rows, N, M)
            for r in range(per_row.shape[0]):
                total += _upper_blocks(
                    lambda a, b: torch.cdist(
                        a, b, p=2, compute_mode="donot_use_mm_for_euclid_dist"
                    ),
                    per_row[r],
                    block_bytes,
                )
    out = torch.triu(total, 1).numpy() / len(used)
    return out + out.T


def chance_corrected_l1(
    probs: Sequence[Any],
    *,
    sample: int | None = None,
    seed: int = 0,
    permutations: int = CHANCE_PERMUTATIONS,
    block_bytes: int = BLOCK_BYTES,
) -> np.ndarray:
    """d(i, j) / d_chance(i, j): the mean per-sample ℓ1 distance between f_i(U) and f_j(U),
    divided by the same distance when the rows of f_j(U) are shuffled (the distance two
    clients would have if their labels were unrelated sample by sample, their class
    frequencies unchanged), averaged over `permutations` seeded shuffles and made symmetric.

    1 means "no more alike than chance"; clients that learned the same classes agree sample
    by sample and sit well below 1. Labels that do not depend on the sample — a constant
    class, random rows (the `fixed` and `random` Byzantine replies) — are at about 1 from
    everyone, whatever their class frequencies, so they cannot look like a group member by
    matching a group's frequencies. A pair with no chance distance (two identical constant
    matrices) gets 1: agreement that says nothing. Cost: (1 + permutations) ℓ1 computations
    on the torch path; `sample` rows of U as in `pairwise_distances`.
    """
    n_clients = len(probs)
    if n_clients == 0:
        return np.zeros((0, 0))
    n = _shape(probs[0])[0]
    rows = sample_rows(n, sample, seed)
    used = np.arange(n) if rows is None else rows
    rng = np.random.default_rng([seed, 1])  # shuffles independent of the row sample
    shuffles = [used[rng.permutation(len(used))] for _ in range(permutations)]
    m = _shape(probs[0])[1]
    step = max(1, int(block_bytes // (8 * m * n_clients * (1 + permutations))))
    observed = torch.zeros((n_clients, n_clients), dtype=torch.float64)
    chance = torch.zeros((n_clients, n_clients), dtype=torch.float64)
    for start in range(0, len(used), step):
        block = slice(start, start + step)
        a = torch.from_numpy(np.stack([_take_rows(p, used[block]) for p in probs]))
        a = a.reshape(n_clients, -1)
        observed += torch.cdist(a, a, p=1)
        for order in shuffles:
            b = torch.from_numpy(np.stack([_take_rows(p, order[block]) for p in probs]))
            chance += torch.cdist(a, b.reshape(n_clients, -1), p=1)
    chance = (chance + chance.T) / (2 * permutations)
    ratio = torch.where(chance > 1e-12, observed / chance.clamp_min(1e-12), 1.0).numpy()
    ratio = (ratio + ratio.T) / 2
    np.fill_diagonal(ratio, 0.0)
    return ratio


def resolve_backend(n_clients: int, rows: int, classes: int, backend: str = "auto") -> str:
    """The ℓ1 backend `pairwise_distances` uses for N clients, `rows` rows of U and M classes."""
    if backend != "auto":
        return backend
    work = n_clients * (n_clients - 1) / 2 * rows * classes
    return "numba" if work >= NUMBA_MIN_WORK and l1_kernel.available() else "torch"


def _l1_numba(
    probs: Sequence[Any],
    rows: np.ndarray | None,
    used: np.ndarray,
    shape: tuple[int, int],
    block_bytes: int,
) -> np.ndarray:
    n_clients, (n, m) = len(probs), shape
    # Rows of U per block: N clients x rows x M float32 values within the memory budget.
    step = max(1, int(block_bytes // (4 * m * n_clients)))
    total = np.zeros((n_clients, n_clients))
    threads = torch.get_num_threads()
    for start in range(0, len(used), step):
        chunk = used[start : start + step]
        rows_arg = chunk if rows is not None or len(chunk) < n else None
        block = np.empty((n_clients, len(chunk) * m), dtype=np.float32)
        for i, p in enumerate(probs):
            block[i] = _take_rows(p, rows_arg).reshape(-1)
        l1_kernel.add_upper_l1(block, total, threads=threads)
    total /= len(used)
    return total + total.T


def _upper_blocks(dist: Any, x: torch.Tensor, block_bytes: int) -> torch.Tensor:
    """dist(x, x) computed only on blocks at or above the diagonal (the rest is mirrored)."""
    n = x.shape[0]
    rows = max(1, min(n, int(block_bytes // (8 * max(n, 1)))))
    out = torch.zeros((n, n), dtype=torch.float64)
    for i in range(0, n, rows):
        out[i : i + rows, i:] = dist(x[i : i + rows], x[i:])
    return out


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
