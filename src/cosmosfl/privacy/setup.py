"""Which mechanism each site's learner gets, with its noise calibrated to the site's budget.

With only `privacy.epsilon` set, a torch learner gets DP-SGD and any other learner
subsample-and-aggregate; the noise multiplier is the smallest one with which the run's planned
fits (one per round, `epochs_plan`) compose to the budget, for this site's record count and
batch size. The returned line says what was chosen; the run header prints it.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from cosmosfl.learners.base import Learner
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.privacy.accountant import Charge, SiteAccountant, calibrate, epsilon_of
from cosmosfl.privacy.aggregate import SubsampleAggregateLearner, vote_sensitivity
from cosmosfl.privacy.dpsgd import DPSGDLearner, dpsgd_charge
from cosmosfl.privacy.settings import PrivacyConfig


def mechanism_for(learner: Learner, settings: PrivacyConfig) -> str:
    """ "dpsgd" or "subsample-aggregate": the configured one, or by framework for "auto"."""
    if settings.mechanism != "auto":
        return settings.mechanism
    return "dpsgd" if isinstance(learner, TorchLearner) else "subsample-aggregate"


def planned_charges(
    mechanism: str, noise_multiplier: float, epochs_plan: tuple[int, ...], n: int, batch_size: int
) -> list[Charge]:
    """The charges of a run's planned fits (one per entry of `epochs_plan`)."""
    if mechanism == "dpsgd":
        return [dpsgd_charge(n, batch_size, e, noise_multiplier) for e in epochs_plan]
    return [Charge("gaussian", noise_multiplier) for _ in epochs_plan]


@lru_cache(maxsize=256)
def calibrated_noise(
    mechanism: str,
    epochs_plan: tuple[int, ...],
    n: int,
    batch_size: int,
    epsilon: float,
    delta: float,
    method: str,
) -> float:
    """The smallest noise multiplier that fits the planned fits into (ε, δ)."""
    return calibrate(
        lambda z: planned_charges(mechanism, z, epochs_plan, n, batch_size), epsilon, delta, method
    )


def privatise(
    client_id: int,
    learner: Learner,
    n_private: int,
    public_x: np.ndarray,
    settings: PrivacyConfig,
    epochs_plan: tuple[int, ...],
    seed: int,
) -> tuple[Learner, str]:
    """`learner` behind its site's mechanism and a fresh accountant, and the line that says
    what was chosen. ValueError when the mechanism does not fit the learner or the data."""
    mechanism = mechanism_for(learner, settings)
    if mechanism == "dpsgd" and not isinstance(learner, TorchLearner):
        raise ValueError(
            f"client {client_id}: privacy.mechanism = dpsgd needs a torch learner, and this "
            f"client's is a {type(learner).__name__}; use auto or subsample-aggregate"
        )
    if mechanism == "subsample-aggregate" and n_private < settings.shards:
        raise ValueError(
            f"client {client_id} holds {n_private} private records, fewer than privacy.shards "
            f"= {settings.shards}; lower privacy.shards"
        )
    batch = int(getattr(learner, "batch_size", 1))
    z = settings.noise_multiplier
    if z is None:
        assert settings.epsilon is not None  # PrivacyConfig.enabled
        z = calibrated_noise(
            mechanism,
            epochs_plan,
            n_private,
            batch,
            settings.epsilon,
            settings.delta,
            settings.accountant,
        )
    planned = epsilon_of(
        planned_charges(mechanism, z, epochs_plan, n_private, batch),
        settings.delta,
        settings.accountant,
    )
    accountant = SiteAccountant(settings.epsilon, settings.delta, settings.accountant)
    budget = f"budget ε = {settings.epsilon:g}" if settings.epsilon is not None else "no budget"
    plan = (
        f"{len(epochs_plan)} fits planned → ε = {planned:.3g} at δ = {settings.delta:g} ({budget})"
    )
    if mechanism == "dpsgd":
        assert isinstance(learner, TorchLearner)
        wrapped: Learner = DPSGDLearner(
            learner, accountant, noise_multiplier=z, max_grad_norm=settings.max_grad_norm
        )
        q = dpsgd_charge(n_private, batch, 1, z).sample_rate
        what = (
            f"DP-SGD (Opacus), noise multiplier {z:.3g}, clip {settings.max_grad_norm:g}, "
            f"Poisson sampling rate {q:.3g}"
        )
    else:
        wrapped = SubsampleAggregateLearner(
            learner,
            public_x,
            accountant,
            shards=settings.shards,
            noise_multiplier=z,
            seed=seed,
            student_epochs=settings.student_epochs,
        )
        sigma = z * vote_sensitivity(len(public_x))
        what = (
            f"subsample-and-aggregate, {settings.shards} shards, vote noise σ = {sigma:.3g} "
            f"(noise multiplier {z:.3g})"
        )
    return wrapped, f"client {client_id} ({type(learner).__name__}): {what}; {plan}"
