"""Subsample-and-aggregate for any learner (Nissim, Raskhodnikova & Smith 2007; PATE's
Gaussian noisy max family, Papernot et al. 2018): the site trains `shards` copies of its own
learner on disjoint shards of its private records and releases, on U, the vote histogram of
the copies plus Gaussian noise, normalised to soft labels.

One record lies in one shard, so it can move only that copy's votes: one vote per row of U
from one class to another, an L2 change of at most sqrt(2 · |U|) for the whole (|U|, M)
histogram. Gaussian noise σ = noise_multiplier · sqrt(2 · |U|) per entry then makes each
release one Gaussian mechanism, charged to the site's accountant before the copies train.
The shard of a record depends only on its position (a seeded permutation of positions), never
on its content, so changing one record changes nothing else's shard.

Everything else the site shows is post-processing of releases and U: its *student* (the
site's learner itself) is fitted on U to the last release, then distils what the federation
sends; predictions, evaluation and the deployed model are the student's. The copies also
distil what the federation sends (U and already-private targets), which keeps each copy a
function of its own shard and public data only.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import numpy as np

from cosmosfl.core.constraints import Constraint, Interval
from cosmosfl.learners.base import Learner, validate_fit_inputs
from cosmosfl.privacy.accountant import Charge, SiteAccountant


def vote_sensitivity(public_size: int) -> float:
    """L2 sensitivity of the (|U|, M) vote histogram to one record (one copy's votes move)."""
    return float(np.sqrt(2.0 * public_size))


def shard_of(n: int, shards: int, seed: int) -> np.ndarray:
    """The shard of each of `n` records by position: a seeded permutation dealt round-robin."""
    order = np.random.default_rng(seed % 2**32).permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) % shards
    return out


def vote_histogram(votes: np.ndarray, num_classes: int) -> np.ndarray:
    """(n, M) counts from (shards, n) class votes."""
    n = votes.shape[1]
    hist = np.zeros((n, num_classes), dtype=np.float64)
    for row in votes:
        hist[np.arange(n), row] += 1.0
    return hist


def noisy_release(hist: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """The released soft labels: counts plus N(0, σ²) noise, clipped at 0, rows normalised
    (a row left all zero becomes uniform). Only this array leaves the site."""
    noisy = np.clip(hist + rng.normal(0.0, sigma, size=hist.shape), 0.0, None)
    sums = noisy.sum(axis=1, keepdims=True)
    uniform = np.full_like(noisy, 1.0 / noisy.shape[1])
    out = np.where(sums > 0, noisy / np.where(sums > 0, sums, 1.0), uniform)
    return out.astype(np.float32)


class SubsampleAggregateLearner(Learner):
    """A site's learner run as subsample-and-aggregate (see the module doc)."""

    mechanism = "subsample-aggregate"
    parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "shards": Interval(int, 1),
        "noise_multiplier": Interval(float, 0),
        "student_epochs": Interval(int, 1),
    }
    # A clone is charged to the same site accountant.
    shared_parameters: ClassVar[tuple[str, ...]] = ("accountant",)

    def __init__(
        self,
        learner: Learner,
        public_x: np.ndarray,
        accountant: SiteAccountant,
        *,
        shards: int,
        noise_multiplier: float,
        seed: int,
        student_epochs: int = 10,
    ) -> None:
        self.learner = learner
        self.public_x = public_x
        self.accountant = accountant
        self.shards = shards
        self.noise_multiplier = noise_multiplier
        self.seed = seed
        self.student_epochs = student_epochs
        self._public_x = np.asarray(public_x)
        self.copies = [copy.deepcopy(learner) for _ in range(shards)]
        self.sigma = float(noise_multiplier) * vote_sensitivity(len(self._public_x))
        self.num_classes = learner.num_classes
        self._rng = np.random.default_rng(int(seed) % 2**32)
        self._release: np.ndarray | None = None  # the last release, until the student moves on

    @property
    def student(self) -> Learner:
        """The site's learner itself, fitted on U to the releases (module doc)."""
        return self.learner

    def shard_votes(self, x: np.ndarray, y: np.ndarray, epochs: int) -> np.ndarray:
        """Train each copy on its shard of (x, y); their (shards, |U|) class votes on U."""
        shard = shard_of(len(x), len(self.copies), self.seed)
        votes = []
        for s, learner in enumerate(self.copies):
            idx = np.flatnonzero(shard == s)
            if len(idx):
                learner.fit(x[idx], y[idx], epochs=epochs)
                votes.append(learner.predict_proba(self._public_x).argmax(axis=1))
        return np.asarray(votes, dtype=np.int64)

    def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
        """Train the copies, release their noisy votes on U, fit the student to the release;
        or nothing (the site keeps its models) if the budget would be exceeded."""
        validate_fit_inputs(x, y, self.num_classes)
        if not self.accountant.try_spend(Charge("gaussian", self.noise_multiplier)):
            return self.accountant.ledger(refused=True)
        hist = vote_histogram(self.shard_votes(x, y, epochs), self.num_classes)
        release = noisy_release(hist, self.sigma, self._rng)
        metrics = self.student.distill(self._public_x, release, epochs=self.student_epochs)
        self._release = release
        loss = {"loss": float(metrics["kl"])} if "kl" in metrics else {}  # the student's fit
        return {**loss, **self.accountant.ledger(refused=False)}

    def _is_public(self, x: np.ndarray) -> bool:
        return x.shape == self._public_x.shape and bool(np.array_equal(x, self._public_x))

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """On U after a fit: the release itself; anywhere else: the student."""
        x = np.asarray(x)
        if self._release is not None and self._is_public(x):
            return self._release.copy()
        return self.student.predict_proba(x)

    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        self._release = None  # the student has moved on from the release
        for learner in self.copies:
            learner.distill(x, targets, weights, epochs=epochs, lam=lam)
        return self.student.distill(x, targets, weights, epochs=epochs, lam=lam)

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
        return self.student.evaluate(x, y)

    def get_state(self) -> dict[str, Any]:
        return {
            "student": self.student.get_state(),
            "copies": [c.get_state() for c in self.copies],
            "accountant": self.accountant.get_state(),
            "rng": self._rng.bit_generator.state,
            "release": self._release,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.student.set_state(state["student"])
        for learner, s in zip(self.copies, state["copies"], strict=True):
            learner.set_state(s)
        self.accountant.set_state(state["accountant"])
        self._rng.bit_generator.state = state["rng"]
        self._release = state["release"]
