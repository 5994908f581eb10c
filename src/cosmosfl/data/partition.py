"""Federated partitions of a labelled dataset: the paper's split, Dirichlet, pathological, IID.

Every partitioner is a pure function of (labels, options, seed). All of them first set aside the
unlabeled public set U (a stratified `public_fraction` of the training data, never given to a
client), then share the remaining training samples among the clients, then draw each client's
test split from the test set with the client's own class proportions. Random draws that can
leave a client empty are retried a bounded number of times, then fail with a clear message.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cosmosfl.data.splitting import capped_allocation, largest_remainder, stratified_indices

__all__ = [
    "PARTITIONERS",
    "Partition",
    "PartitionError",
    "dirichlet_split",
    "iid_split",
    "make_partition",
    "paper_split",
    "pathological_split",
]

MAX_DRAWS = 100  # Dirichlet draws tried before giving up on a split with an empty client


class PartitionError(ValueError):
    """The requested partition is invalid or cannot be drawn from this data.

    A message about classes is made with `about_classes` (a template with `{classes}` and the
    label ids); `naming(classes)` gives it with the dataset's class names in place of ids."""

    template: str | None = None
    class_ids: list[int] | None = None

    @classmethod
    def about_classes(cls, template: str, class_ids: list[int]) -> PartitionError:
        err = cls(template.format(classes=class_ids))
        err.template, err.class_ids = template, list(class_ids)
        return err

    def naming(self, classes: Sequence[str]) -> PartitionError:
        """This error with class names (`classes[i]` names label i) instead of label ids."""
        if self.template is None or self.class_ids is None:
            return self
        names = [classes[i] if 0 <= i < len(classes) else i for i in self.class_ids]
        return PartitionError(self.template.format(classes=names))


@dataclass(frozen=True, eq=False)
class Partition:
    """Which training / test samples each client holds, and the public set U."""

    client_train: tuple[np.ndarray, ...]  # indices into the training set, one array per client
    client_test: tuple[np.ndarray, ...]  # indices into the test set, one array per client
    public: np.ndarray  # indices into the training set forming U (labels are dropped)
    client_group: np.ndarray | None = None  # (N,) class group of each client (paper split)
    class_groups: tuple[np.ndarray, ...] | None = None  # the classes of each group (paper split)

    @property
    def num_clients(self) -> int:
        return len(self.client_train)

    def label_counts(self, y_train: np.ndarray, num_classes: int) -> np.ndarray:
        """(N, M) matrix: how many training samples of each class every client holds."""
        y = np.asarray(y_train)
        if len(y) and int(y.max()) >= num_classes:
            raise ValueError(f"num_classes={num_classes} but y_train has label {int(y.max())}")
        return np.stack([np.bincount(y[idx], minlength=num_classes) for idx in self.client_train])


# -- shared steps ------------------------------------------------------------------------------
def _labels(y: object, field: str) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim != 1 or a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise PartitionError(
            f"{field} must be a 1-D array of integer class labels, got shape {a.shape} "
            f"dtype {a.dtype}"
        )
    if len(a) and a.min() < 0:
        raise PartitionError(f"{field} has negative label {int(a.min())}; labels must be >= 0")
    return a.astype(np.int64, copy=False)


def _check_int(value: object, field: str, low: int, high: int | None = None) -> int:
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
    if not ok or value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise PartitionError(f"{field} must be an integer {allowed}, got {value!r}")
    return int(value)


def _check_fraction(value: object, field: str, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, int | float | np.floating) and not isinstance(value, bool)
    low_ok = ok and (value >= 0 if allow_zero else value > 0)
    if not (low_ok and value < 1):
        allowed = "[0, 1)" if allow_zero else "(0, 1)"
        raise PartitionError(f"{field} must be a number in {allowed}, got {value!r}")
    return float(value)


def _check_alpha(alpha: object) -> float:
    ok = isinstance(alpha, int | float | np.floating) and not isinstance(alpha, bool)
    if not (ok and math.isfinite(alpha) and alpha > 0):
        raise PartitionError(f"alpha must be a finite number > 0, got {alpha!r}")
    return float(alpha)


def _rngs(seed: object, n: int) -> list[np.random.Generator]:
    """Independent streams per step, so e.g. the test split never shifts the train split."""
    seed = _check_int(seed, "seed", 0)
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]


def _prepare(
    y_train: object, y_test: object, num_clients: object, public_fraction: object
) -> tuple[np.ndarray, np.ndarray, int, float]:
    y_tr, y_te = _labels(y_train, "y_train"), _labels(y_test, "y_test")
    n = _check_int(num_clients, "num_clients", 1)
    frac = _check_fraction(public_fraction, "public_fraction")
    if len(y_te) == 0:
        raise PartitionError("y_test is empty; every client needs a test split")
    private = len(y_tr) - round(frac * len(y_tr))
    if private < n:
        raise PartitionError(
            f"too few samples: {len(y_tr)} training samples minus the public set "
            f"(public_fraction={frac}) leaves {private} for num_clients={n}; use fewer clients, "
            "a smaller public_fraction or more data"
        )
    return y_tr, y_te, n, frac


def _public_split(
    y_train: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """U = a stratified random `fraction` of every class; returns (public, the rest)."""
    public = stratified_indices(y_train, fraction, rng)
    keep = np.ones(len(y_train), dtype=bool)
    keep[public] = False
    return public, np.flatnonzero(keep).astype(np.int64)


def _test_split(
    y_train: np.ndarray,
    y_test: np.ndarray,
    client_train: list[np.ndarray],
    test_per_client: object,
    rng: np.random.Generator,
) -> tuple[np.ndarray, ...]:
    """Per client: test samples drawn with its train class proportions, without replacement."""
    n = len(client_train)
    if test_per_client is None:
        size = max(1, len(y_test) // n)
    else:
        size = _check_int(test_per_client, "test_per_client", 1)
    m = int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
    by_class = [np.flatnonzero(y_test == c) for c in range(m)]
    available = np.array([len(ix) for ix in by_class], dtype=np.int64)
    out = []
    for i, idx in enumerate(client_train):
        hist = np.bincount(y_train[idx], minlength=m)
        take = capped_allocation(hist, size, available)
        if take.sum() == 0:
            raise PartitionError.about_classes(
                f"client {i} holds classes {{classes}}, none of which occur in the test "
                "set, so it cannot get a test split",
                np.flatnonzero(hist).tolist(),
            )
        parts = [rng.choice(by_class[c], size=k, replace=False) for c, k in enumerate(take) if k]
        out.append(np.sort(np.concatenate(parts)).astype(np.int64))
    return tuple(out)


def _dirichlet_shares(
    indices: np.ndarray, num_parts: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Shuffle `indices` and cut them into parts sized by one Dirichlet(alpha) draw."""
    p = rng.dirichlet(np.full(num_parts, alpha))
    if not (np.all(np.isfinite(p)) and p.sum() > 0):  # tiny alpha can underflow to all zeros
        p = np.eye(num_parts)[rng.integers(num_parts)]
    sizes = largest_remainder(p, len(indices))
    return np.split(rng.permutation(indices), np.cumsum(sizes)[:-1])


def _finish(
    y_train: np.ndarray,
    y_test: np.ndarray,
    clients: list[list[np.ndarray]] | list[np.ndarray],
    public: np.ndarray,
    test_per_client: object,
    rng: np.random.Generator,
    client_group: np.ndarray | None = None,
    class_groups: tuple[np.ndarray, ...] | None = None,
) -> Partition:
    train = [
        np.sort(np.concatenate(c) if isinstance(c, list) else c).astype(np.int64) for c in clients
    ]
    test = _test_split(y_train, y_test, train, test_per_client, rng)
    return Partition(tuple(train), test, public, client_group, class_groups)


def _empty_error(what: str, alpha: float, n: int) -> PartitionError:
    return PartitionError(
        f"{what}: after {MAX_DRAWS} Dirichlet draws (alpha={alpha}) some of the {n} clients "
        "still had no training samples; use fewer clients, a larger alpha, or more data"
    )


# -- the partitioners --------------------------------------------------------------------------
def paper_split(
    y_train: np.ndarray,
    y_test: np.ndarray,
    num_clients: int,
    *,
    seed: int,
    num_groups: int = 5,
    alpha: float = 5.0,
    mix_fraction: float = 0.1,
    public_fraction: float = 0.2,
    test_per_client: int | None = None,
) -> Partition:
    """The COSMOS paper's split: class groups, Dirichlet within groups, then a mixing pool.

    Classes form `num_groups` disjoint groups; clients join groups in consecutive id blocks; each
    class is shared among its group's clients by Dirichlet(alpha); then `mix_fraction` of every
    client's samples is pooled, shuffled and dealt round-robin to all clients.
    """
    y_tr, y_te, n, frac = _prepare(y_train, y_test, num_clients, public_fraction)
    a = _check_alpha(alpha)
    mix = _check_fraction(mix_fraction, "mix_fraction", allow_zero=True)
    rng_public, rng_groups, rng_draw, rng_mix, rng_test = _rngs(seed, 5)
    classes = np.unique(y_tr)
    g = _check_int(num_groups, "num_groups", 1)
    if g > len(classes):
        raise PartitionError(
            f"num_groups={g} exceeds the {len(classes)} classes in y_train; allowed: "
            f"1..{len(classes)}"
        )
    if g > n:
        raise PartitionError(f"num_groups={g} exceeds num_clients={n}; allowed: 1..{n}")
    public, rest = _public_split(y_tr, frac, rng_public)
    class_groups = tuple(np.sort(c) for c in np.array_split(rng_groups.permutation(classes), g))
    client_blocks = np.array_split(np.arange(n), g)  # earlier groups get the extra client
    client_group = np.concatenate([np.full(len(b), k) for k, b in enumerate(client_blocks)])
    rest_by_class = {int(c): rest[y_tr[rest] == c] for c in classes}
    for k, (cls, block) in enumerate(zip(class_groups, client_blocks, strict=True)):
        have = sum(len(rest_by_class[int(c)]) for c in cls)
        if have < len(block):
            raise PartitionError(
                f"group {k} (classes {cls.tolist()}) has {have} private samples for "
                f"{len(block)} clients; use fewer clients or more data"
            )
    for _ in range(MAX_DRAWS):
        owned: list[list[np.ndarray]] = [[] for _ in range(n)]
        for cls, block in zip(class_groups, client_blocks, strict=True):
            for c in cls:
                shares = _dirichlet_shares(rest_by_class[int(c)], len(block), a, rng_draw)
                for client, share in zip(block, shares, strict=True):
                    owned[client].append(share)
        if all(sum(len(s) for s in parts) > 0 for parts in owned):
            break
    else:
        raise _empty_error("paper_split", a, n)
    clients = _mix([np.concatenate(parts).astype(np.int64) for parts in owned], mix, rng_mix)
    groups = client_group.astype(np.int64)
    return _finish(y_tr, y_te, clients, public, test_per_client, rng_test, groups, class_groups)


def _mix(clients: list[np.ndarray], fraction: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Pool `fraction` of every client's samples (at least one stays) and deal them uniformly."""
    if fraction == 0:
        return clients
    kept, pooled = [], []
    for idx in clients:
        k = min(round(fraction * len(idx)), len(idx) - 1)
        order = rng.permutation(idx)
        pooled.append(order[:k])
        kept.append(order[k:])
    pool = rng.permutation(np.concatenate(pooled))
    dealer = rng.permutation(len(clients))  # who receives first is random, not client 0
    receivers = dealer[np.arange(len(pool)) % len(clients)]
    return [np.concatenate([kept[i], pool[receivers == i]]) for i in range(len(clients))]


def dirichlet_split(
    y_train: np.ndarray,
    y_test: np.ndarray,
    num_clients: int,
    *,
    seed: int,
    alpha: float = 0.5,
    public_fraction: float = 0.2,
    test_per_client: int | None = None,
) -> Partition:
    """Every class's private samples are shared among all clients by a Dirichlet(alpha) draw."""
    y_tr, y_te, n, frac = _prepare(y_train, y_test, num_clients, public_fraction)
    a = _check_alpha(alpha)
    rng_public, rng_draw, rng_test = _rngs(seed, 3)
    public, rest = _public_split(y_tr, frac, rng_public)
    classes = np.unique(y_tr[rest])
    for _ in range(MAX_DRAWS):
        owned: list[list[np.ndarray]] = [[] for _ in range(n)]
        for c in classes:
            for client, share in enumerate(
                _dirichlet_shares(rest[y_tr[rest] == c], n, a, rng_draw)
            ):
                owned[client].append(share)
        if all(sum(len(s) for s in parts) > 0 for parts in owned):
            break
    else:
        raise _empty_error("dirichlet_split", a, n)
    return _finish(y_tr, y_te, owned, public, test_per_client, rng_test)


def pathological_split(
    y_train: np.ndarray,
    y_test: np.ndarray,
    num_clients: int,
    *,
    seed: int,
    classes_per_client: int = 2,
    public_fraction: float = 0.2,
    test_per_client: int | None = None,
) -> Partition:
    """Each client holds `classes_per_client` classes; a class is split evenly among its holders.

    Classes are handed out least-used first (random tie-breaks), so every class is used when
    num_clients * classes_per_client >= the number of classes; otherwise some stay unused.
    """
    y_tr, y_te, n, frac = _prepare(y_train, y_test, num_clients, public_fraction)
    rng_public, rng_assign, rng_test = _rngs(seed, 3)
    public, rest = _public_split(y_tr, frac, rng_public)
    classes = np.unique(y_tr[rest])
    k = _check_int(classes_per_client, "classes_per_client", 1, len(classes))
    uses = np.zeros(len(classes), dtype=np.int64)
    holders: list[list[int]] = [[] for _ in classes]
    for client in range(n):
        chosen = np.argsort(uses + rng_assign.random(len(classes)), kind="stable")[:k]
        uses[chosen] += 1
        for j in chosen:
            holders[j].append(client)
    owned: list[list[np.ndarray]] = [[] for _ in range(n)]
    for j, c in enumerate(classes):
        if holders[j]:
            idx = rng_assign.permutation(rest[y_tr[rest] == c])
            for client, share in zip(holders[j], np.array_split(idx, len(holders[j])), strict=True):
                owned[client].append(share)
    empty = [i for i, parts in enumerate(owned) if sum(len(s) for s in parts) == 0]
    if empty:
        raise PartitionError(
            f"pathological_split: clients {empty[:10]} got no samples because their classes "
            "have fewer private samples than holders; use fewer clients, more "
            "classes_per_client, or more data"
        )
    return _finish(y_tr, y_te, owned, public, test_per_client, rng_test)


def iid_split(
    y_train: np.ndarray,
    y_test: np.ndarray,
    num_clients: int,
    *,
    seed: int,
    public_fraction: float = 0.2,
    test_per_client: int | None = None,
) -> Partition:
    """Shuffle the private samples and deal them into equal shares (sizes differ by <= 1)."""
    y_tr, y_te, n, frac = _prepare(y_train, y_test, num_clients, public_fraction)
    rng_public, rng_deal, rng_test = _rngs(seed, 3)
    public, rest = _public_split(y_tr, frac, rng_public)
    shares = np.array_split(rng_deal.permutation(rest), n)
    return _finish(y_tr, y_te, list(shares), public, test_per_client, rng_test)


PARTITIONERS: dict[str, Callable[..., Partition]] = {
    "paper": paper_split,
    "dirichlet": dirichlet_split,
    "pathological": pathological_split,
    "iid": iid_split,
}


def partition_options(name: str) -> tuple[str, ...]:
    """The keyword options a partitioner accepts (besides `seed`)."""
    params = inspect.signature(PARTITIONERS[name]).parameters.values()
    return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "seed")


def make_partition(
    name: str,
    y_train: np.ndarray,
    y_test: np.ndarray,
    num_clients: int,
    *,
    seed: int,
    **options: object,
) -> Partition:
    """Partition by registry name, checking option names first so typos fail loudly."""
    if name not in PARTITIONERS:
        raise PartitionError(
            f"unknown partitioner {name!r}; allowed: {', '.join(sorted(PARTITIONERS))}"
        )
    allowed = partition_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise PartitionError(
            f"unknown option(s) {unknown} for partitioner {name!r}; allowed: {', '.join(allowed)}"
        )
    return PARTITIONERS[name](y_train, y_test, num_clients, seed=seed, **options)
