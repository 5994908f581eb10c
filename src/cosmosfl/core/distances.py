"""Distances between clients' pseudo-labels on U (paper section 4.1): the ℓ1 of Algorithm 1's
input, ℓ2, and the chance-corrected ℓ1 (an extension), exact or on a sample of U's rows, with
torch or the compiled numba kernel (core/l1_kernel.py)."""

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
