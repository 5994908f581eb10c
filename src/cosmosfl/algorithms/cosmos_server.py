"""Training a server model h_k to its teacher f̄_k, measured on a held-out slice of U (step
3b of a COSMOS round, docs/cosmos.md "One round, step by step"; f̄_k is step 3a's).

The server holds U and each cluster's teacher f̄_k(U), so it can tell how well h_k copies
f̄_k on rows of U that h_k did not train on, and train until that fidelity stops improving
instead of for a fixed number of epochs (`server_training: fidelity`, the default since 0.4;
"fixed" is the paper's `server_epochs` at `server_lr`). The learning rate is chosen the same
way: training starts at `server_lr`; when an epoch does not improve the held-out fidelity the
best state is restored and the rate cut (where the learner has one), and after `patience`
cuts without improvement training stops. Nothing here reads labels: fidelity is agreement with
and KL to the teacher.

Module-level functions so the K independent trainings can run in an engine's worker processes
(`map_public`): where a training runs changes no result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cosmosfl.core.seeds import derive_seed
from cosmosfl.learners.base import Learner

# How the learning rate shrinks after an epoch that did not improve the held-out fidelity.
LR_CUT = 0.3
# An improvement smaller than this (relative, on the held-out KL) counts as none, so a plateau
# ends training instead of creeping on for max_epochs.
MIN_IMPROVEMENT = 1e-3
SERVER_TRAININGS = ("fidelity", "fixed")


@dataclass(frozen=True)
class ServerFit:
    """How one h_k is trained: for `epochs` epochs ("fixed"), or by held-out fidelity for at
    most `max_epochs` epochs with `patience` learning-rate cuts ("fidelity")."""

    mode: str
    epochs: int
    lam: float
    holdout: np.ndarray | None = None  # row indices of U held out (fidelity mode)
    lr: float | None = None  # the (starting) rate, where the learner has one; None: its own
    max_epochs: int = 100
    patience: int = 2


def holdout_rows(n: int, fraction: float, seed: int) -> np.ndarray:
    """A seeded `fraction` of U's row indices (at least one row, fewer than n), sorted; the
    same rows every round, so fidelity is comparable across rounds."""
    size = min(max(1, round(n * fraction)), n - 1)
    rng = np.random.default_rng(derive_seed(seed, "cosmos-server-holdout"))
    return np.sort(rng.choice(n, size=size, replace=False))


def fidelity(model: Learner, x: np.ndarray, teacher: np.ndarray) -> dict[str, float]:
    """Agreement (shared argmax) and KL(teacher ‖ model), mean over rows of `x`."""
    p = np.clip(np.asarray(model.predict_proba(x), dtype=np.float64), 1e-12, 1.0)
    t = np.asarray(teacher, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(t > 0, t * (np.log(np.clip(t, 1e-12, 1.0)) - np.log(p)), 0.0).sum(axis=1)
    return {
        "agreement": float((p.argmax(axis=1) == t.argmax(axis=1)).mean()),
        "kl": float(kl.mean()),
    }


def train_server_model(
    public_x: np.ndarray, job: tuple[Learner, np.ndarray, ServerFit]
) -> tuple[Learner, dict[str, float], np.ndarray]:
    """One h_k trained towards its teacher f̄_k on U as `job`'s ServerFit says; returns h_k,
    its training statistics (fidelity on held-out U before and after, epochs) and h_k(U)."""
    model, teacher, fit = job
    if fit.lr is not None and hasattr(model, "distill_lr"):
        model.distill_lr = fit.lr  # each round starts from the configured rate
    if fit.mode == "fixed" or fit.holdout is None:
        stats = model.distill(public_x, teacher, epochs=fit.epochs, lam=fit.lam)
        return model, {k: float(v) for k, v in stats.items()}, model.predict_proba(public_x)
    keep = np.ones(len(public_x), dtype=bool)
    keep[fit.holdout] = False
    x_fit, t_fit = public_x[keep], teacher[keep]
    x_out, t_out = public_x[fit.holdout], teacher[fit.holdout]
    stats = _fit_by_fidelity(model, (x_fit, t_fit), (x_out, t_out), fit)
    return model, stats, model.predict_proba(public_x)


def _fit_by_fidelity(
    model: Learner,
    train: tuple[np.ndarray, np.ndarray],
    held_out: tuple[np.ndarray, np.ndarray],
    fit: ServerFit,
) -> dict[str, float]:
    start = fidelity(model, *held_out)
    best, best_state, best_epoch = start, model.get_state(), 0
    lr0 = getattr(model, "distill_lr", None)  # TorchLearner's; other learners have no rate
    cuts, epoch = 0, 0
    last: dict[str, Any] = {}
    best_lr = lr0
    while epoch < fit.max_epochs:
        last = model.distill(*train, epochs=1, lam=fit.lam)
        epoch += 1
        now = fidelity(model, *held_out)
        if now["kl"] < best["kl"] * (1 - MIN_IMPROVEMENT):
            best, best_state, best_epoch = now, model.get_state(), epoch
            best_lr = getattr(model, "distill_lr", None)
            continue
        cuts += 1
        if cuts > fit.patience:
            break
        if lr0 is not None:  # go back to the best state and try a smaller step from there
            model.set_state(best_state)
            model.distill_lr = model.distill_lr * LR_CUT  # type: ignore[attr-defined]
    model.set_state(best_state)
    if lr0 is not None:
        model.distill_lr = lr0  # type: ignore[attr-defined]
    return {
        "kl": float(last.get("kl", float("nan"))),
        "consistency": float(last.get("consistency", 0.0)),
        "fidelity_agreement": best["agreement"],
        "fidelity_kl": best["kl"],
        "fidelity_agreement_start": start["agreement"],
        "fidelity_kl_start": start["kl"],
        "epochs": float(epoch),
        "best_epoch": float(best_epoch),
        **({"lr_best": float(best_lr)} if best_lr is not None else {}),
    }


__all__ = [
    "SERVER_TRAININGS",
    "ServerFit",
    "fidelity",
    "holdout_rows",
    "train_server_model",
]
