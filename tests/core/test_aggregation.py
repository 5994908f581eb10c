import numpy as np
import pytest

from cosmosfl.core.aggregation import aggregate, apply_temperature


def rows(*r):
    return np.array(r, dtype=np.float32)


A = rows([0.8, 0.2], [0.5, 0.5])
B = rows([0.6, 0.4], [0.1, 0.9])
C = rows([0.0, 1.0], [0.3, 0.7])


def test_mean_is_the_papers_average():
    assert np.allclose(aggregate([A, B, C], "mean"), (A + B + C) / 3)


def test_median_is_robust_to_one_outlier_and_on_simplex():
    bad = rows([0.0, 1.0], [1.0, 0.0])
    out = aggregate([A, A, bad], "median")
    assert np.allclose(out, A)
    assert np.allclose(out.sum(1), 1)


def test_max_takes_most_confident_client_per_sample():
    out = aggregate([A, B, C], "max")
    assert np.allclose(out[0], C[0])  # C is certain on sample 0
    assert np.allclose(out[1], B[1])  # B is most confident on sample 1


def test_trimmed_mean_drops_extremes():
    stack = [A, A, B, rows([1, 0], [1, 0]), rows([0, 1], [0, 1])]
    out = aggregate(stack, "trimmed_mean", trim_fraction=0.2)
    # With 5 clients and 20 % trimming, one highest and one lowest value go per entry.
    e = np.sort(np.stack(stack), axis=0)[1:4].mean(0)
    assert np.allclose(out, e / e.sum(1, keepdims=True))
    with pytest.raises(ValueError, match="trim_fraction"):
        aggregate(stack, "trimmed_mean", trim_fraction=0.5)


def test_unknown_rule_and_empty():
    with pytest.raises(ValueError, match="allowed"):
        aggregate([A], "mode")
    with pytest.raises(ValueError, match="empty"):
        aggregate([], "mean")


def test_temperature():
    p = rows([0.7, 0.2, 0.1], [0.2, 0.2, 0.6])
    assert np.allclose(apply_temperature(p, 1.0), p)
    hard = apply_temperature(p, 0.0)
    assert hard.tolist() == [[1, 0, 0], [0, 0, 1]]
    sharp = apply_temperature(p, 0.5)
    expected = p**2 / (p**2).sum(1, keepdims=True)
    assert np.allclose(sharp, expected, atol=1e-6)
    soft = apply_temperature(p, 100.0)
    assert np.allclose(soft, 1 / 3, atol=0.01)
    tiny = apply_temperature(p, 1e-4)  # must not underflow to NaN
    assert np.isfinite(tiny).all() and np.allclose(tiny, hard, atol=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        apply_temperature(p, -1)


def _stacked(probs, rule, trim_fraction=0.2):
    """The reference: every matrix copied to float64 and stacked (the earlier implementation)."""
    stack = np.stack([np.asarray(p, dtype=np.float64) for p in probs])
    if rule == "mean":
        out = stack.mean(axis=0)
    elif rule == "median":
        med = np.median(stack, axis=0)
        out = med / med.sum(-1, keepdims=True)
    elif rule == "max":
        best = stack.max(axis=2).argmax(axis=0)
        out = stack[best, np.arange(stack.shape[1])]
    else:
        k = len(probs)
        cut = int(np.floor(trim_fraction * k))
        kept = np.sort(stack, axis=0)[cut : k - cut].mean(axis=0)
        out = kept / kept.sum(-1, keepdims=True)
    return out.astype(np.float32)


@pytest.mark.parametrize("rule", ["mean", "median", "max", "trimmed_mean"])
@pytest.mark.parametrize("k", [1, 2, 9, 17, 300])
def test_same_bits_as_the_stacked_float64_reference(rule, k):
    # The mean is a running float64 sum (no stacked copy of the clients' labels); records
    # must not change, so it must give exactly the bits of the mean over a float64 stack.
    rng = np.random.default_rng(k)
    probs = [rng.dirichlet(np.full(10, 0.3), 257).astype(np.float32) for _ in range(k)]
    assert np.array_equal(
        aggregate(probs, rule).view(np.uint32), _stacked(probs, rule).view(np.uint32)
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_mean_of_other_float_dtypes(dtype):
    rng = np.random.default_rng(0)
    probs = [rng.dirichlet(np.ones(4), 50).astype(dtype) for _ in range(5)]
    assert np.array_equal(aggregate(probs, "mean"), _stacked(probs, "mean"))


@pytest.mark.parametrize("rule", ["mean", "median", "max", "trimmed_mean"])
def test_matrices_of_different_shapes_are_refused(rule):
    # Never broadcast a (1, M) or shorter matrix into the others.
    with pytest.raises(ValueError, match="differ in shape"):
        aggregate([A, A[:1]], rule)


def test_inputs_are_left_unchanged():
    a, b = A.copy(), B.copy()
    aggregate([a, b], "mean")
    assert np.array_equal(a, A) and np.array_equal(b, B)
