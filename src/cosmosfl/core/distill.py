"""Distillation losses: KL to soft targets and the consistency regulariser r_B (paper eq. 1-2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def kl_to_targets(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """KL(targets ‖ softmax(logits)), "batchmean" reduction, optionally weighted per sample."""
    log_q = F.log_softmax(logits, dim=1)
    # xlogy makes 0·log 0 = 0, so one-hot targets (temperature 0) are fine.
    per_sample = (torch.special.xlogy(targets, targets) - targets * log_q).sum(dim=1)
    if weights is not None:
        per_sample = per_sample * weights
    return per_sample.sum() / logits.shape[0]


def consistency_loss(
    logits_neighbour: torch.Tensor,
    logits_clean: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """r_B(g)(x) = ℓ(g(x'), g(x)) for a sampled neighbour x' of x; ℓ is the main term's KL.

    Unlike the official code, gradients flow through both g(x') and g(x), so λ really acts
    as a smoothness penalty on the model being trained.
    """
    return kl_to_targets(logits_neighbour, F.softmax(logits_clean, dim=1), weights)
