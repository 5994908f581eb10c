"""The membership-inference audit of what one site releases: canaries planted in its private
data, the federation run with and without each, and each canary scored from what an attacker
sees (experiment layer: it builds and runs whole federations).

The game, per seed: `canaries` synthetic records (Gaussian inputs in the models' standardised
input space, uniformly random labels: records no model would predict unless it saw them) are
split at random into two halves A and B. Two runs of the same config and seed plant A and B
respectively in the audited site's private data, so every canary is a member in one run and a
non-member in the other, with everything else paired. The server's attacker chooses U, so U
also holds a near-duplicate of every canary (the input plus N(0, `near_noise`²) noise) in both
runs. The score of a canary is the log-probability of its label, read

- from the site's soft labels on U in each round (the near-duplicate's row): what the server
  and, through teachers, the other sites see;
- from the site's deployed model, queried on the canary itself, after the last round.

Members against non-members give AUC, TPR at 1 % / 0.1 % FPR and the empirical ε lower bound
per channel (privacy/attack.py). Under a budget, a lower bound above the accountant's ε would
be a bug in the mechanism or the accounting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from cosmosfl.core.seeds import derive_seed
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import ExperimentConfig
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.private_clients import privatise_clients
from cosmosfl.experiment.runner import run_built
from cosmosfl.learners.base import Capabilities, Learner
from cosmosfl.privacy.attack import attack_summary
from cosmosfl.privacy.settings import PrivacyConfig

DEPLOYED = "deployed model"
SOFT_MEAN = "soft labels, mean over rounds"


class ReleaseRecorder(Learner):
    """The audited site's learner, keeping a copy of every prediction it makes on U (what the
    site sends as soft labels); everything else is the wrapped learner's."""

    def __init__(self, learner: Learner, public_x: np.ndarray) -> None:
        self.learner = learner
        self.public_x = public_x
        self.num_classes = learner.num_classes
        self.releases: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        learner = self.__dict__.get("learner")
        if learner is None:
            raise AttributeError(name)
        return getattr(learner, name)

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        return self.learner.capabilities

    def check_neighbours(self, x: np.ndarray) -> None:
        self.learner.check_neighbours(x)

    def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
        return self.learner.fit(x, y, epochs=epochs)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        probs = self.learner.predict_proba(x)
        if x.shape == self.public_x.shape and np.array_equal(x, self.public_x):
            self.releases.append(np.array(probs, copy=True))
        return probs

    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        return self.learner.distill(x, targets, weights, epochs=epochs, lam=lam)


@dataclasses.dataclass
class Canaries:
    x: np.ndarray  # (C, *sample shape), in the models' input space
    y: np.ndarray  # (C,)
    near: np.ndarray  # near-duplicates planted in U
    in_first: np.ndarray  # (C,) bool: a member of the first run (else of the second)


def make_canaries(
    count: int, sample_shape: tuple[int, ...], num_classes: int, seed: int, near_noise: float
) -> Canaries:
    rng = np.random.default_rng(derive_seed(seed, "audit-canaries") % 2**32)
    x = rng.normal(size=(count, *sample_shape)).astype(np.float32)
    y = rng.integers(0, num_classes, count)
    near = (x + near_noise * rng.normal(size=x.shape)).astype(np.float32)
    in_first = np.zeros(count, dtype=bool)
    in_first[rng.permutation(count)[: count // 2]] = True
    return Canaries(x, y, near, in_first)


def _log_prob(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.log(np.clip(probs[np.arange(len(labels)), labels], 1e-12, None))


def run_with(
    cfg: ExperimentConfig, client: int, canaries: Canaries, members: np.ndarray
) -> tuple[dict[str, np.ndarray], float | None]:
    """One run with the canaries `members` planted in `client`'s data: every canary's score
    per channel, and the site's ε spent (None without privacy)."""
    bare = dataclasses.replace(cfg, workers=1, privacy=PrivacyConfig())
    exp = build_experiment(bare)
    ids = [c.id for c in exp.clients]
    if client not in ids:
        raise ConfigError(f"audit: client {client} is not a client of this config (ids {ids})")
    target = exp.clients[ids.index(client)]
    x, y = target.train
    target.train = (np.concatenate([x, canaries.x[members]]), np.r_[y, canaries.y[members]])
    offset = len(exp.public_x)
    exp.public_x = np.concatenate([exp.public_x, canaries.near])
    if hasattr(exp.algorithm, "public_probe"):  # it measures on the unplanted U's labels
        exp.algorithm.public_probe = None  # type: ignore[union-attr]
    privatise_clients(cfg.privacy, exp.clients, exp.public_x, exp.algorithm, cfg.rounds, cfg.seed)
    recorder = ReleaseRecorder(target.learner, exp.public_x)
    target.learner = recorder
    run_built(exp)
    scores = {
        f"soft labels, round {t}": _log_prob(r[offset:], canaries.y)
        for t, r in enumerate(recorder.releases, start=1)
    }
    if scores:
        scores[SOFT_MEAN] = np.mean(list(scores.values()), axis=0)
    scores[DEPLOYED] = _log_prob(recorder.predict_proba(canaries.x), canaries.y)
    accountant = getattr(recorder.learner, "accountant", None)
    return scores, (accountant.spent if accountant is not None else None)


def run_audit(
    cfg: ExperimentConfig,
    *,
    canaries: int = 20,
    client: int = 0,
    seeds: Sequence[int] = (1,),
    near_noise: float = 0.1,
) -> dict[str, Any]:
    """The audit (module doc) of `client` under `cfg`, over `seeds`: per channel the attack's
    statistics, and the accountant's ε of the site (the largest of its runs)."""
    if canaries < 2:
        raise ConfigError(f"audit: canaries = {canaries}; plant at least 2 (one per run)")
    members: dict[str, list[np.ndarray]] = {}
    nonmembers: dict[str, list[np.ndarray]] = {}
    spent: list[float] = []
    for seed in seeds:
        run_cfg = dataclasses.replace(cfg, seed=int(seed))
        shape = build_shape(run_cfg)
        planted = make_canaries(canaries, shape[0], shape[1], int(seed), near_noise)
        for first in (True, False):
            mask = planted.in_first if first else ~planted.in_first
            scores, eps = run_with(run_cfg, client, planted, mask)
            for channel, s in scores.items():
                members.setdefault(channel, []).append(s[mask])
                nonmembers.setdefault(channel, []).append(s[~mask])
            if eps is not None:
                spent.append(eps)
    delta = cfg.privacy.delta if cfg.privacy.enabled else 0.0
    channels = {
        name: attack_summary(np.concatenate(members[name]), np.concatenate(nonmembers[name]), delta)
        for name in members
        if len(members[name]) == 2 * len(seeds)  # a channel every run had
    }
    accountant = max(spent) if spent else None
    return {
        "client": client,
        "canaries": canaries,
        "seeds": [int(s) for s in seeds],
        "near_noise": near_noise,
        "delta": delta,
        "accountant_epsilon": accountant,
        "channels": channels,
        "lower_bound_within_accountant": (
            None
            if accountant is None
            else all(c["epsilon_lower_bound"] <= accountant + 1e-9 for c in channels.values())
        ),
    }


def build_shape(cfg: ExperimentConfig) -> tuple[tuple[int, ...], int]:
    """(sample shape of the models' inputs, classes) of a config's data."""
    exp = build_experiment(dataclasses.replace(cfg, workers=1, privacy=PrivacyConfig()))
    return tuple(exp.public_x.shape[1:]), exp.num_classes


def audit_table(result: dict[str, Any]) -> str:
    """The audit as a Markdown table, one row per channel."""
    eps = result["accountant_epsilon"]
    lines = [
        f"Membership-inference audit of client {result['client']}: {result['canaries']} "
        f"canaries, seeds {', '.join(map(str, result['seeds']))}; accountant's ε: "
        + ("none (no differential privacy)" if eps is None else f"{eps:.3g}"),
        "",
        "| channel | AUC | TPR @ 1 % FPR | TPR @ 0.1 % FPR | empirical ε lower bound |",
        "|---|---|---|---|---|",
    ]
    for name, c in result["channels"].items():
        lines.append(
            f"| {name} | {c['auc']:.3f} | {c['tpr_at_1pct_fpr']:.3f} | "
            f"{c['tpr_at_0.1pct_fpr']:.3f} | {c['epsilon_lower_bound']:.3f} |"
        )
    return "\n".join(lines) + "\n"
