"""A compiled kernel for the ℓ1 distances between many clients' pseudo-labels (optional numba).

`torch.cdist(p=1)` runs at about 1.6·10⁹ absolute differences per second on a 2-core CPU: its
loop streams two full rows per pair from memory. This kernel tiles the pairs (tiles of rows of
the block, one tile pair per thread) and computes 2 x 2 pairs per pass over the columns, so each
loaded value is used twice and the working set of a tile pair stays in cache: 12-13·10⁹/s on
the same machine (`cosmosfl bench clustering`). It needs numba (`pip install cosmosfl[fast]`);
without it `pairwise_distances` uses torch.cdist.

Results are deterministic (every output element is written by exactly one loop iteration, in a
fixed order) but not bit-equal to torch.cdist: the per-block sums are float32 (relative error
~1e-7), accumulated in float64 across blocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Rows of a block per tile, and columns per kernel call: a tile pair is 2 x 32 x 1024 float32
# values = 256 KiB, which stays in a core's L2 cache (measured best of 8/16/32 x 1024-4096).
TILE = 32
COLUMNS = 1024

_kernel: Any = None


_available: bool | None = None


def available() -> bool:
    """Whether numba imports (the kernel is compiled on first use, ~3 s, then cached). An
    installed numba that fails to import (e.g. built for another numpy) counts as missing."""
    global _available
    if _available is None:
        try:
            import numba  # noqa: F401

            _available = True
        except Exception:
            _available = False
    return _available


def _compile() -> Any:
    import numba

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def upper_l1(x: Any, out: Any, tile: int) -> None:  # pragma: no cover - compiled
        n, d = x.shape
        nt = (n + tile - 1) // tile
        for p in numba.prange(nt * (nt + 1) // 2):
            # p -> (ti, tj), ti <= tj: row ti of the upper triangle of tile pairs.
            ti = 0
            rem = p + 0
            while rem >= nt - ti:
                rem = rem - (nt - ti)
                ti = ti + 1
            tj = ti + rem
            i0 = ti * tile
            i1 = min(n, i0 + tile)
            j0 = tj * tile
            j1 = min(n, j0 + tile)
            for i in range(i0, i1, 2):
                ib = min(i + 1, i1 - 1)
                for j in range(j0, j1, 2):
                    jb = min(j + 1, j1 - 1)
                    s00 = np.float32(0.0)
                    s01 = np.float32(0.0)
                    s10 = np.float32(0.0)
                    s11 = np.float32(0.0)
                    for k in range(d):
                        a = x[i, k]
                        b = x[ib, k]
                        u = x[j, k]
                        v = x[jb, k]
                        s00 += abs(a - u)
                        s01 += abs(a - v)
                        s10 += abs(b - u)
                        s11 += abs(b - v)
                    # Only the strict upper triangle, each pair once (ib == i, jb == j at
                    # odd tile edges).
                    if j > i:
                        out[i, j] += s00
                    if jb > i and jb != j:
                        out[i, jb] += s01
                    if ib != i:
                        if j > ib:
                            out[ib, j] += s10
                        if jb > ib and jb != j:
                            out[ib, jb] += s11

    return upper_l1


def add_upper_l1(block: np.ndarray, out: np.ndarray, threads: int | None = None) -> None:
    """out[i, j] += Σ_k |block[i, k] - block[j, k]| for i < j (the strict upper triangle).

    `block` is (N, columns) float32, C-contiguous; `out` is (N, N) float64. Columns are processed
    COLUMNS at a time so the float32 sums stay short. `threads`: numba threads (default: all).
    """
    global _kernel
    import numba

    if _kernel is None:
        _kernel = _compile()
    if block.dtype != np.float32 or block.ndim != 2:
        raise ValueError(f"block must be a 2-D float32 array, got {block.dtype} {block.shape}")
    if out.shape != (block.shape[0], block.shape[0]) or out.dtype != np.float64:
        raise ValueError(f"out must be ({block.shape[0]}, {block.shape[0]}) float64")
    import torch

    # numba's OpenMP layer sets the process's OpenMP thread count (numba.set_num_threads),
    # which torch's intra-op parallelism shares: without putting torch's back, every torch
    # call after a clustering ran with numba's thread count, ignoring `threads: 1` (on a
    # loaded machine client distillation became 5-20x slower; benchmarks/scale.py).
    torch_threads = torch.get_num_threads()
    previous = numba.get_num_threads()
    if threads is not None:
        numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    try:
        for start in range(0, block.shape[1], COLUMNS):
            _kernel(np.ascontiguousarray(block[:, start : start + COLUMNS]), out, TILE)
    finally:
        numba.set_num_threads(previous)
        if torch.get_num_threads() != torch_threads:
            torch.set_num_threads(torch_threads)
