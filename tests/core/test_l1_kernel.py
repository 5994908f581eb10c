"""The compiled ℓ1 kernel (numba backend) computes the same distances as the float64 formula,
at every tile edge (odd N, N below and above the tile size, blocks split across U), and "auto"
only switches to it for large problems."""

import numpy as np
import pytest

from cosmosfl.core import clustering, distances, l1_kernel
from cosmosfl.core.clustering import pairwise_distances

needs_numba = pytest.mark.skipif(
    not l1_kernel.available(), reason="numba not installed (pip install 'cosmosfl[fast]')"
)


def reference(probs):
    p = np.stack(probs).astype(np.float64)
    return np.abs(p[:, None] - p[None, :]).sum(axis=3).mean(axis=2)


def random_probs(n_clients, n=50, m=7, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.ones(m), n).astype(np.float32) for _ in range(n_clients)]


@needs_numba
@pytest.mark.parametrize("n_clients", [1, 2, 3, 31, 32, 33, 67])
@pytest.mark.parametrize("block_bytes", [200, 1 << 27])
def test_numba_backend_equals_the_formula(n_clients, block_bytes):
    p = random_probs(n_clients, seed=n_clients)
    d = pairwise_distances(p, backend="numba", block_bytes=block_bytes)
    np.testing.assert_allclose(d, reference(p), rtol=1e-6, atol=1e-7)
    assert (np.diag(d) == 0).all() and (d == d.T).all()


@needs_numba
def test_numba_backend_with_sampled_rows_and_long_rows():
    # More columns than one kernel call takes (COLUMNS), so the float64 accumulation across
    # calls is exercised; sampled rows go through the same path.
    p = random_probs(9, n=400, m=10, seed=4)
    np.testing.assert_allclose(
        pairwise_distances(p, backend="numba"), reference(p), rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(
        pairwise_distances(p, backend="numba", sample=37, seed=2),
        pairwise_distances(p, backend="torch", sample=37, seed=2),
        rtol=1e-6,
        atol=1e-7,
    )


@needs_numba
def test_numba_backend_is_deterministic_across_thread_counts():
    p = random_probs(40, n=60, seed=1)
    block = np.stack([q.reshape(-1) for q in p])
    one, two = np.zeros((40, 40)), np.zeros((40, 40))
    l1_kernel.add_upper_l1(block, one, threads=1)
    l1_kernel.add_upper_l1(block, two, threads=2)
    assert (one == two).all()
    assert (np.tril(one) == 0).all()


def test_auto_uses_torch_below_the_work_threshold(monkeypatch):
    # Usual federations (tens of clients) keep the bit-exact float64 torch path.
    called = []
    monkeypatch.setattr(distances, "_l1_numba", lambda *a: called.append(a))
    p = random_probs(5)
    d = pairwise_distances(p)
    assert not called
    assert (d == pairwise_distances(p, backend="torch")).all()
    if l1_kernel.available():
        monkeypatch.setattr(distances, "NUMBA_MIN_WORK", 0)
        pairwise_distances(p)
        assert called


def test_unknown_backend_and_missing_numba_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="distance backend 'gpu' is not supported"):
        pairwise_distances(random_probs(3), backend="gpu")
    monkeypatch.setattr(l1_kernel, "available", lambda: False)
    with pytest.raises(ImportError, match=r"cosmosfl\[fast\]"):
        pairwise_distances(random_probs(3), backend="numba")
    # auto falls back to torch silently when numba is missing.
    monkeypatch.setattr(distances, "NUMBA_MIN_WORK", 0)
    p = random_probs(3)
    assert (pairwise_distances(p) == pairwise_distances(p, backend="torch")).all()


@needs_numba
def test_kernel_rejects_wrong_dtypes():
    with pytest.raises(ValueError, match="float32"):
        l1_kernel.add_upper_l1(np.zeros((3, 4)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="float64"):
        l1_kernel.add_upper_l1(np.zeros((3, 4), np.float32), np.zeros((2, 2)))


def test_numba_backend_is_l1_only():
    with pytest.raises(ValueError, match="l1 distances only"):
        pairwise_distances(random_probs(3), "l2", backend="numba")


CHILD = """
import sys, numpy as np, torch
torch.set_num_threads(int(sys.argv[1]))
from cosmosfl.core.clustering import pairwise_distances
rng = np.random.default_rng(0)
probs = [rng.dirichlet(np.ones(7), 50).astype(np.float32) for _ in range(5)]
pairwise_distances(probs, backend="numba")
print(torch.get_num_threads())
"""


@needs_numba
def test_torch_keeps_its_thread_count_after_the_kernel():
    # numba's OpenMP layer, when it starts (the first kernel call of a process), sets the
    # process's OpenMP thread count, which torch shares: a run with `threads: 1` then trained
    # every model after its clustering with numba's count. A fresh process, so the first
    # call is the one checked.
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(clustering.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "1"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) == 1
