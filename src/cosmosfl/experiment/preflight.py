"""Checks of a federation before round 1: what would otherwise fail only after every client has
trained (a public set U with other feature columns, a server model that cannot read U) or never
fail at all (test labels beyond num_classes read as a low accuracy).

`check_federation` is cheap (no training: at most one server model built and run on two rows
of U, and the learners' `check_neighbours` on two rows) and deterministic (no global random
state is consumed, so a run's records are the same with or without it). `simulate` and
`run_experiment` (in-process engine) call it before any training.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from cosmosfl.client import Client
from cosmosfl.core.seeds import derive_seed

__all__ = ["PreflightError", "check_federation"]

# How many rows of U (and of each client's training inputs) the model checks run on.
PROBE_ROWS = 2


class PreflightError(ValueError):
    """The federation's inputs cannot work together; the message says what and how to fix it."""


def check_federation(
    algorithm: object, clients: Sequence[Client], public_x: np.ndarray, *, seed: int = 0
) -> None:
    """Raise PreflightError for the first of these problems, before anything trains:

    - U is empty, or has NaN/inf values;
    - a client's train/test/validation inputs have another sample shape than U;
    - the learners disagree on num_classes, or a client's labels lie outside 0..M-1;
    - the algorithm's server model (`algorithm.server_learner`, COSMOS) cannot predict on U;
    - with λ > 0 (`algorithm.lam`), a learner that trains with r_B (`capabilities.consistency`)
      cannot make neighbours x' of its inputs for it (`check_neighbours`).

    `seed` seeds the server model built for the check (it is then discarded).
    """
    with _untouched_rng():
        u = _check_public(public_x)
        if not clients:
            raise PreflightError("a federation needs at least one client; got none")
        num_classes = _check_num_classes(clients)
        sample = tuple(u.shape[1:])
        for client in clients:
            for split, (x, y) in _splits(client):
                _check_inputs(client.id, split, x, sample)
                _check_labels(client.id, split, y, num_classes)
        server = _check_server_model(algorithm, u, num_classes, seed)
        if _consistency_weight(algorithm) > 0:
            _check_neighbours(clients, server, u, algorithm)


@contextmanager
def _untouched_rng() -> Iterator[None]:
    """Leave torch's, numpy's and Python's global random states as they were (a model built
    or run here must not change what the run draws afterwards)."""
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)


def _check_public(public_x: Any) -> np.ndarray:
    u = np.asarray(public_x)
    if u.ndim == 0 or len(u) == 0:
        raise PreflightError(
            f"the public set U is empty (shape {u.shape}): give public_x at least one sample "
            "(unlabelled inputs of the same kind as the clients')"
        )
    if u.dtype.kind in "fc":
        bad = ~np.isfinite(u)
        if bad.any():
            rows = int(bad.reshape(len(u), -1).any(axis=1).sum())
            raise PreflightError(
                f"the public set U has {int(bad.sum())} NaN/inf values in {rows} of its "
                f"{len(u)} samples: missing values must be imputed (or those samples dropped) "
                "before U is shared"
            )
    return u


def _check_num_classes(clients: Sequence[Client]) -> int:
    by_count: dict[Any, list[int]] = {}
    for client in clients:
        m = getattr(client.learner, "num_classes", None)
        if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
            raise PreflightError(
                f"client {client.id}'s learner ({type(client.learner).__name__}) has "
                f"num_classes = {m!r}: set it to the number of classes in the federation"
            )
        by_count.setdefault(int(m), []).append(client.id)
    if len(by_count) > 1:
        groups = "; ".join(f"{m} for clients {ids}" for m, ids in sorted(by_count.items()))
        raise PreflightError(
            f"the learners disagree on num_classes ({groups}): give every learner the same "
            "num_classes, the number of classes in the whole federation"
        )
    return next(iter(by_count))


def _splits(client: Client) -> Iterator[tuple[str, tuple[Any, Any]]]:
    yield "training", client.train
    yield "test", client.test
    if client.validation is not None:
        yield "validation", client.validation


def _describe(shape: tuple[int, ...]) -> str:
    if len(shape) == 1:
        return f"{shape[0]} features per sample"
    return f"samples of shape {shape}"


def _check_inputs(cid: int, split: str, x: Any, sample: tuple[int, ...]) -> None:
    shape = tuple(np.shape(x))
    if not shape or shape[0] == 0:  # an empty split has nothing to compare
        return
    if shape[1:] != sample:
        theirs, ours = _describe(shape[1:]), _describe(sample)
        if len(sample) == 1 and len(shape) == 2:
            fix = "give every party the same feature columns in the same order"
        else:
            fix = (
                "give every party inputs of the same shape (same channels, image size and "
                "layout; flatten images to vectors everywhere or nowhere)"
            )
        raise PreflightError(f"client {cid}'s {split} inputs have {theirs}, U has {ours}: {fix}")


def _check_labels(cid: int, split: str, y: Any, num_classes: int) -> None:
    labels = np.asarray(y)
    if labels.size == 0:
        return
    if labels.ndim != 1:
        raise PreflightError(
            f"client {cid}'s {split} labels have shape {labels.shape}: give one class index "
            f"0..{num_classes - 1} per sample (not one-hot rows)"
        )
    kind = labels.dtype.kind
    whole = kind in "iub" or (kind == "f" and bool(np.all(np.mod(labels, 1) == 0)))
    if not whole:
        raise PreflightError(
            f"client {cid}'s {split} labels have dtype {labels.dtype} and are not all whole "
            f"numbers: give class indices 0..{num_classes - 1} (encode class names as "
            "integers, with one mapping for every client)"
        )
    low, high = labels.min().item(), labels.max().item()
    if low < 0 or high >= num_classes:
        fix = (
            f"or give every learner num_classes = {int(high) + 1}"
            if low >= 0
            else "class indices start at 0"
        )
        raise PreflightError(
            f"client {cid}'s {split} labels lie in [{low:g}, {high:g}], but the learners have "
            f"num_classes = {num_classes} (labels 0..{num_classes - 1}): number the classes "
            f"0..{num_classes - 1} with one mapping for all clients ({fix})"
        )


def _server_name(algorithm: object) -> str:
    name = getattr(algorithm, "server_model", None)
    return f"server_model {name!r}" if isinstance(name, str) else "the server_learner's model"


def _check_server_model(algorithm: object, u: np.ndarray, num_classes: int, seed: int) -> Any:
    """Build the algorithm's server model (if it trains one) and predict on U's first rows;
    returns the model for the neighbour check, or None."""
    factory = getattr(algorithm, "server_learner", None)
    if not callable(factory):
        return None
    sample = tuple(int(d) for d in u.shape[1:])
    what = _server_name(algorithm)
    try:
        learner = factory(sample, num_classes, derive_seed(seed, "preflight-server"))
        probs = np.asarray(learner.predict_proba(u[:PROBE_ROWS]))
    except Exception as err:
        raise PreflightError(
            f"{what} cannot take U's inputs of shape {sample}: {type(err).__name__}: {err}. "
            f"{_server_fix(sample)}"
        ) from err
    expected = (min(len(u), PROBE_ROWS), num_classes)
    if probs.shape != expected:
        raise PreflightError(
            f"{what} returns probabilities of shape {probs.shape} for {expected[0]} rows of U, "
            f"expected {expected}: its output layer must have num_classes = {num_classes} units"
        )
    return learner


def _server_fix(sample: tuple[int, ...]) -> str:
    kind = "vectors" if len(sample) == 1 else "images"
    try:  # the registry names the models for this kind of input
        from cosmosfl.models.registry import model_names

        names = ", ".join(model_names(kind))
    except Exception:  # the hint is optional; the error itself is what matters
        names = "see cosmosfl.models"
    what = "feature vectors" if kind == "vectors" else "images"
    return (
        f"Use a server_model for {what} ({names}), or pass server_learner=... that builds a "
        "model for these inputs"
    )


def _consistency_weight(algorithm: object) -> float:
    # A deprecated name for another setting (Ditto's `lam`, now `prox_weight`) is not λ, and
    # reading it would warn.
    if "lam" in getattr(algorithm, "renamed_parameters", {}):
        return 0.0
    lam = getattr(algorithm, "lam", 0)
    return float(lam) if isinstance(lam, int | float) and not isinstance(lam, bool) else 0.0


def _check_neighbours(
    clients: Sequence[Client], server: Any, u: np.ndarray, algorithm: object
) -> None:
    """With λ > 0 every model trains on neighbours x' of its inputs (r_B): ask each learner
    that trains with r_B (`capabilities.consistency`) whether it can make them
    (`check_neighbours(x)`), on two rows."""
    lam = _consistency_weight(algorithm)
    checks = [(f"client {c.id}", c.learner, np.asarray(c.train[0])[:PROBE_ROWS]) for c in clients]
    if server is not None:
        checks.append((_server_name(algorithm), server, u[:PROBE_ROWS]))
    for who, learner, x in checks:
        if not learner.capabilities.consistency:  # a learner without r_B is not asked
            continue
        try:
            learner.check_neighbours(x)
        except ValueError as err:
            raise PreflightError(
                f"{who} cannot train with the consistency regulariser r_B (lam = {lam:g}): {err}"
            ) from err
