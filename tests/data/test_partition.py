"""Partitioners: shared invariants, the paper's split in detail, and errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

from cosmosfl.data import (
    PARTITIONERS,
    Partition,
    PartitionError,
    dirichlet_split,
    iid_split,
    make_partition,
    paper_split,
    pathological_split,
)

M = 10


def _labels(per_class: int, seed: int = 0, classes: int = M) -> np.ndarray:
    """Balanced labels in a shuffled order."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(classes), per_class))


Y_TRAIN = _labels(200)
Y_TEST = _labels(100, seed=1)


def _split(name: str, seed: int = 0, num_clients: int = 10, **options) -> Partition:
    return make_partition(name, Y_TRAIN, Y_TEST, num_clients, seed=seed, **options)


# -- invariants every partitioner keeps --------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_clients_and_public_set_cover_the_training_set_exactly(name: str) -> None:
    p = _split(name)
    everything = np.concatenate([*p.client_train, p.public])
    assert len(everything) == len(Y_TRAIN)  # no overlaps between any two parts ...
    assert np.array_equal(np.sort(everything), np.arange(len(Y_TRAIN)))  # ... and nothing lost
    assert all(len(c) > 0 for c in p.client_train)
    assert all(c.dtype == np.int64 for c in (*p.client_train, *p.client_test, p.public))
    assert p.num_clients == 10


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_seeded_and_deterministic(name: str) -> None:
    a, b, c = _split(name, seed=3), _split(name, seed=3), _split(name, seed=4)
    for x, y in zip(a.client_train, b.client_train, strict=True):
        assert np.array_equal(x, y)
    for x, y in zip(a.client_test, b.client_test, strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(a.public, b.public)
    differs = [
        not np.array_equal(x, y) for x, y in zip(a.client_train, c.client_train, strict=True)
    ]
    assert any(differs) and not np.array_equal(a.public, c.public)


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_test_splits_are_valid_and_follow_train_classes(name: str) -> None:
    p = _split(name)
    counts = p.label_counts(Y_TRAIN, M)
    for i, idx in enumerate(p.client_test):
        assert len(idx) == len(Y_TEST) // 10  # the default size
        assert idx.min() >= 0 and idx.max() < len(Y_TEST)
        assert len(np.unique(idx)) == len(idx)  # without replacement within a client
        assert set(np.unique(Y_TEST[idx])) <= set(np.flatnonzero(counts[i]))


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_public_set_takes_each_class_in_proportion(name: str) -> None:
    sizes = [333, 101, 66, 50, 77, 42, 90, 45, 60, 71]  # imbalanced, with awkward remainders
    y = np.random.default_rng(0).permutation(np.repeat(np.arange(M), sizes))
    p = make_partition(name, y, Y_TEST, 5, seed=0, public_fraction=0.3)
    per_class = np.bincount(y[p.public], minlength=M)
    assert np.all(np.abs(per_class - 0.3 * np.array(sizes)) < 1)
    assert len(p.public) == round(0.3 * len(y))


def test_test_split_proportions_match_train_within_rounding() -> None:
    y_test = _labels(400, seed=2)  # large enough that no class runs out
    p = paper_split(Y_TRAIN, y_test, 10, seed=0, test_per_client=97)
    counts = p.label_counts(Y_TRAIN, M)
    for i, idx in enumerate(p.client_test):
        got = np.bincount(y_test[idx], minlength=M)
        exact = 97 * counts[i] / counts[i].sum()
        assert got.sum() == 97
        assert np.all(np.abs(got - exact) < 1)


def test_test_split_is_capped_by_what_the_test_set_has() -> None:
    y_test = np.array([0, 0, 1, 2, 2, 2, 3, 4, 5, 6, 7, 8, 9], dtype=np.int64)
    p = pathological_split(Y_TRAIN, y_test, 10, seed=0, classes_per_client=2, test_per_client=50)
    counts = p.label_counts(Y_TRAIN, M)
    available = np.bincount(y_test, minlength=M)
    for i, idx in enumerate(p.client_test):
        got = np.bincount(y_test[idx], minlength=M)
        held = counts[i] > 0
        assert np.all(got <= available) and np.all(got[~held] == 0)
        assert got.sum() == available[held].sum()  # all that exists, nothing invented


# -- the paper's split -------------------------------------------------------------------------
def test_paper_groups_are_disjoint_and_clients_are_in_consecutive_blocks() -> None:
    p = paper_split(Y_TRAIN, Y_TEST, 7, seed=0, num_groups=5)
    assert p.class_groups is not None and p.client_group is not None
    assert np.array_equal(np.sort(np.concatenate(p.class_groups)), np.arange(M))
    assert [len(g) for g in p.class_groups] == [2, 2, 2, 2, 2]
    assert p.client_group.tolist() == [0, 0, 1, 1, 2, 3, 4]  # earlier groups larger
    uneven = paper_split(Y_TRAIN, Y_TEST, 9, seed=0, num_groups=4)
    assert sorted(len(g) for g in uneven.class_groups) == [2, 2, 3, 3]
    assert uneven.client_group.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3]


def test_paper_without_mixing_keeps_clients_inside_their_group() -> None:
    p = paper_split(Y_TRAIN, Y_TEST, 25, seed=1, mix_fraction=0.0)
    for i, idx in enumerate(p.client_train):
        own = p.class_groups[p.client_group[i]]
        assert set(np.unique(Y_TRAIN[idx])) <= set(own.tolist())
    # ... and every class is shared only among the clients of its group.
    counts = p.label_counts(Y_TRAIN, M)
    private = np.bincount(Y_TRAIN, minlength=M) - np.bincount(Y_TRAIN[p.public], minlength=M)
    assert np.array_equal(counts.sum(axis=0), private)


def test_paper_mixing_brings_in_the_expected_share_of_foreign_samples() -> None:
    y = _labels(1000)
    y_test = _labels(50)
    g, f = 5, 0.1
    p = paper_split(y, y_test, 25, seed=2, num_groups=g, mix_fraction=f)
    foreign = np.array(
        [
            np.count_nonzero(~np.isin(y[idx], p.class_groups[p.client_group[i]]))
            for i, idx in enumerate(p.client_train)
        ]
    )
    total = sum(len(idx) for idx in p.client_train)
    # A pooled sample lands on a client of another group with probability 1 - 1/G (groups hold
    # equal data here), so the expected foreign share is f (1 - 1/G) = 0.08.
    assert foreign.sum() / total == pytest.approx(f * (1 - 1 / g), abs=0.01)
    # The pool is dealt uniformly: each client gets about f * total / N pooled samples.
    per_client = f * total / 25 * (1 - 1 / g)
    assert np.all(foreign > 0.5 * per_client) and np.all(foreign < 1.5 * per_client)


def test_paper_mixing_moves_a_tenth_of_each_client() -> None:
    y = _labels(1000)
    before = paper_split(y, Y_TEST, 25, seed=3, mix_fraction=0.0)
    after = paper_split(y, Y_TEST, 25, seed=3, mix_fraction=0.1)
    # The Dirichlet stage draws from its own stream, so the split before mixing is the same.
    total = sum(len(idx) for idx in before.client_train)
    owner = np.full(len(y), -1)
    for i, idx in enumerate(before.client_train):
        owner[idx] = i
    moved = 0
    for i, (b, a) in enumerate(zip(before.client_train, after.client_train, strict=True)):
        stayed = np.intersect1d(a, b)
        assert len(b) - len(stayed) <= np.ceil(0.1 * len(b))  # at most a tenth leaves
        assert len(stayed) >= 1
        moved += np.count_nonzero(owner[a] != i)
    # Pooled samples (a tenth) return to their owner only with probability 1/N.
    assert moved / total == pytest.approx(0.1 * (1 - 1 / 25), abs=0.01)


def _within_group_max_share(p: Partition) -> float:
    """Mean over classes of the largest share one client of the group holds."""
    counts = p.label_counts(Y_TRAIN, M)
    return float(np.mean([counts[:, c].max() / counts[:, c].sum() for c in range(M)]))


def test_paper_dirichlet_alpha_controls_concentration() -> None:
    # 10 clients in 5 groups: two clients share each class.
    flat = paper_split(Y_TRAIN, Y_TEST, 10, seed=0, alpha=1e6, mix_fraction=0.0)
    counts = flat.label_counts(Y_TRAIN, M)
    for c in range(M):
        holders = counts[:, c][counts[:, c] > 0]
        assert len(holders) == 2 and abs(holders[0] - holders[1]) <= 2
    shares = [
        _within_group_max_share(
            paper_split(Y_TRAIN, Y_TEST, 10, seed=s, alpha=0.05, mix_fraction=0)
        )
        for s in range(4)
    ]
    # Dirichlet(0.05, 0.05) puts almost all mass near 0 or 1: the larger share is ~0.95 on average.
    assert np.mean(shares) > 0.8
    assert _within_group_max_share(flat) < 0.51


def test_paper_terminates_for_extreme_alpha() -> None:
    p = paper_split(Y_TRAIN, Y_TEST, 5, seed=0, alpha=1e-12)  # one client per group: always fine
    assert p.num_clients == 5 and all(len(c) for c in p.client_train)


# -- other partitioners ------------------------------------------------------------------------
def test_dirichlet_alpha_controls_heterogeneity() -> None:
    def spread(alpha: float) -> float:
        counts = dirichlet_split(Y_TRAIN, Y_TEST, 10, seed=0, alpha=alpha).label_counts(Y_TRAIN, M)
        return float(np.mean(counts.max(axis=0) / counts.sum(axis=0)))

    assert spread(1e6) < 0.11  # every client holds ~1/10 of every class
    assert spread(0.05) > 0.6


def test_pathological_gives_each_client_its_classes_evenly() -> None:
    p = pathological_split(Y_TRAIN, Y_TEST, 10, seed=0, classes_per_client=3)
    counts = p.label_counts(Y_TRAIN, M)
    assert np.all((counts > 0).sum(axis=1) == 3)
    assert np.all((counts > 0).sum(axis=0) == 3)  # 30 slots over 10 classes: each used 3 times
    for c in range(M):
        shares = counts[:, c][counts[:, c] > 0]
        assert shares.max() - shares.min() <= 1


def test_iid_shares_are_even_and_mixed() -> None:
    p = iid_split(Y_TRAIN, Y_TEST, 7, seed=0)
    sizes = [len(c) for c in p.client_train]
    assert max(sizes) - min(sizes) <= 1
    assert np.all(p.label_counts(Y_TRAIN, M) > 0)
    assert p.client_group is None and p.class_groups is None


def test_make_partition_matches_direct_call() -> None:
    a = make_partition("dirichlet", Y_TRAIN, Y_TEST, 6, seed=9, alpha=0.3)
    b = dirichlet_split(Y_TRAIN, Y_TEST, 6, seed=9, alpha=0.3)
    for x, y in zip(a.client_train, b.client_train, strict=True):
        assert np.array_equal(x, y)


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: paper_split(Y_TRAIN, Y_TEST, 20, seed=0, num_groups=11), "num_groups=11"),
        (lambda: paper_split(Y_TRAIN, Y_TEST, 3, seed=0, num_groups=5), "num_clients=3"),
        (lambda: paper_split(Y_TRAIN, Y_TEST, 10, seed=0, alpha=0.0), "alpha"),
        (lambda: paper_split(Y_TRAIN, Y_TEST, 10, seed=0, alpha=float("nan")), "alpha"),
        (lambda: dirichlet_split(Y_TRAIN, Y_TEST, 10, seed=0, alpha=float("inf")), "alpha"),
        (lambda: iid_split(Y_TRAIN, Y_TEST, 10, seed=0, public_fraction=0.0), "public_fraction"),
        (lambda: iid_split(Y_TRAIN, Y_TEST, 10, seed=0, public_fraction=1.0), "public_fraction"),
        (lambda: paper_split(Y_TRAIN, Y_TEST, 10, seed=0, mix_fraction=1.0), "mix_fraction"),
        (lambda: paper_split(Y_TRAIN, Y_TEST, 10, seed=0, mix_fraction=-0.1), "mix_fraction"),
        (lambda: iid_split(Y_TRAIN, Y_TEST, 0, seed=0), "num_clients"),
        (lambda: iid_split(Y_TRAIN, Y_TEST, 2.5, seed=0), "num_clients"),
        (
            lambda: pathological_split(Y_TRAIN, Y_TEST, 5, seed=0, classes_per_client=0),
            "classes_per_client",
        ),
        (
            lambda: pathological_split(Y_TRAIN, Y_TEST, 5, seed=0, classes_per_client=11),
            "classes_per_client",
        ),
        (lambda: iid_split(Y_TRAIN[:10], Y_TEST, 9, seed=0), "too few samples"),
        (lambda: iid_split(Y_TRAIN.reshape(2, -1), Y_TEST, 5, seed=0), "y_train"),
        (lambda: iid_split(Y_TRAIN.astype(float), Y_TEST, 5, seed=0), "y_train"),
        (lambda: iid_split(Y_TRAIN, Y_TEST[:0], 5, seed=0), "y_test"),
        (lambda: iid_split(Y_TRAIN, Y_TEST, 5, seed=-1), "seed"),
        (lambda: iid_split(Y_TRAIN, Y_TEST, 5, seed=0, test_per_client=0), "test_per_client"),
        (lambda: make_partition("shards", Y_TRAIN, Y_TEST, 5, seed=0), "dirichlet, iid"),
        (lambda: make_partition("iid", Y_TRAIN, Y_TEST, 5, seed=0, alpha=1.0), "alpha"),
    ],
)
def test_invalid_input_is_rejected_with_a_message(call, field: str) -> None:
    with pytest.raises(PartitionError) as info:
        call()
    assert field in str(info.value)


def test_unknown_option_lists_the_allowed_ones() -> None:
    with pytest.raises(PartitionError) as info:
        make_partition("paper", Y_TRAIN, Y_TEST, 5, seed=0, mix=0.2)
    message = str(info.value)
    assert "'mix'" in message
    assert all(o in message for o in ("num_groups", "alpha", "mix_fraction", "public_fraction"))


def test_hopeless_dirichlet_draws_stop_with_advice() -> None:
    # 30 clients, 10 classes and alpha 1e-3: each class lands almost entirely on one client.
    with pytest.raises(PartitionError, match="larger alpha"):
        dirichlet_split(Y_TRAIN, Y_TEST, 30, seed=0, alpha=1e-3)
    with pytest.raises(PartitionError, match="larger alpha"):
        paper_split(Y_TRAIN, Y_TEST, 30, seed=0, alpha=1e-3)


def test_group_too_small_for_its_clients() -> None:
    y = np.concatenate([np.zeros(3, np.int64), np.ones(300, np.int64)])
    with pytest.raises(PartitionError, match="group"):
        paper_split(y, np.array([0, 1]), 20, seed=0, num_groups=2, public_fraction=0.1)
