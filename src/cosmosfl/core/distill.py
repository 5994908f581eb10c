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


CONSISTENCY_TARGETS = ("live", "detached")


def consistency_loss(
    logits_neighbour: torch.Tensor,
    logits_clean: torch.Tensor,
    weights: torch.Tensor | None = None,
    *,
    target: str = "live",
) -> torch.Tensor:
    """r_B(g)(x) = ℓ(g(x'), g(x)) for a sampled neighbour x' of x; ℓ is the main term's KL.

    `target="live"` (the paper's r_B as written): gradients flow through both g(x') and g(x),
    so λ acts as a smoothness penalty on both views. `"detached"`: g(x) is a fixed target
    (stop-gradient), as in most consistency-regularisation methods, so r_B only pulls the
    neighbour's prediction towards the clean one. Unlike the official code, the neighbour view
    always carries gradients, so λ really changes the model being trained.
    """
    if target not in CONSISTENCY_TARGETS:
        raise ValueError(
            f"consistency target {target!r} is not supported; allowed: "
            f"{', '.join(CONSISTENCY_TARGETS)}"
        )
    clean = logits_clean.detach() if target == "detached" else logits_clean
    # KL in log space on both sides. Through softmax(g(x)) the gradient of p·log p is
    # log p + 1, which is -inf where a confident model's softmax underflows to exactly 0, and
    # the softmax Jacobian's 0 there makes it NaN; log_softmax keeps every term finite.
    log_p = F.log_softmax(clean, dim=1)
    per_sample = (log_p.exp() * (log_p - F.log_softmax(logits_neighbour, dim=1))).sum(dim=1)
    if weights is not None:
        per_sample = per_sample * weights
    return per_sample.sum() / logits_neighbour.shape[0]
