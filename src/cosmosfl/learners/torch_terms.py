"""Extra loss terms for `TorchLearner.fit` (its `extra_losses`), used by client handlers of
parameter-sharing baselines: a proximal term towards reference weights (FedProx μ, Ditto λ)
and distillation towards another model's predictions on the same batch (pFedCK)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import torch
import torch.nn.functional as F

from cosmosfl.learners.torch import LossTerm, TorchLearner


def proximal_term(
    learner: TorchLearner,
    mu: float,
    reference: Mapping[str, torch.Tensor] | None = None,
    frozen: Collection[str] = (),
) -> LossTerm:
    """μ/2·||w − w_ref||² over `learner`'s parameters (frozen ones aside). `reference` maps
    parameter names to tensors (another model's parameters); default: the weights now, i.e.
    at the start of the training call the term is made for. The reference is copied now."""
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"prox_mu must be a finite number >= 0, got {mu}")
    named = dict(learner.model.named_parameters())
    source = reference if reference is not None else named
    ref = {n: source[n].detach().clone().to(learner.device) for n in named}

    def term(xb: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        squares = (((p - ref[n]) ** 2).sum() for n, p in named.items() if n not in frozen)
        return mu / 2 * sum(squares)  # type: ignore[return-value]

    return term


def distillation_term(teacher: TorchLearner, weight: float, temperature: float) -> LossTerm:
    """weight·T²·KL(teacher_T ‖ student_T) on the batch, the teacher in eval mode and without
    gradients (deep mutual learning's term, as pFedCK uses it)."""
    if not (math.isfinite(weight) and weight >= 0) or not temperature > 0:
        raise ValueError(
            f"kd_weight must be >= 0 and kd_temperature > 0, got {weight}, {temperature}"
        )
    teacher.model.eval()

    def term(xb: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            target = F.softmax(teacher.model(xb) / temperature, dim=1)
        kd = F.kl_div(F.log_softmax(logits / temperature, dim=1), target, reduction="batchmean")
        return weight * temperature**2 * kd

    return term
