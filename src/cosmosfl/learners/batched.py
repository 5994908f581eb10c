"""Training several models of one architecture as one: stacked parameters + torch.func.vmap.

For the K cluster models on the server (same architecture, same public inputs U, different
teachers) or clients that share an architecture. One forward/backward then drives all K models,
which keeps a GPU busy where one small model would leave it idle. Adam is elementwise, so Adam
on the stacked parameters is exactly K independent Adams: results equal per-model training up
to floating-point reassociation (tested). On CPUs the compute itself dominates and the
batched form was not faster in our measurements (benchmarks/README.md), so nothing uses it by
default; it is the building block for GPU runs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap


class StackedModels:
    """K same-architecture modules trained together; `write_back` copies the result out."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        if not models:
            raise ValueError("StackedModels needs at least one model")
        first = models[0]
        signature = [(n, tuple(p.shape)) for n, p in first.named_parameters()]
        for i, m in enumerate(models[1:], start=1):
            if (
                type(m) is not type(first)
                or [(n, tuple(p.shape)) for n, p in m.named_parameters()] != signature
            ):
                raise ValueError(f"model {i} does not have the architecture of model 0")
        self.models = list(models)
        params, buffers = stack_module_state(self.models)
        self.params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        self.buffers = {k: v.detach().clone() for k, v in buffers.items()}
        # A stateless copy on the meta device: only its structure is used by functional_call.
        self._base = copy.deepcopy(first).to("meta")

    def __len__(self) -> int:
        return len(self.models)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (K, B, M) for inputs (K, B, ...): model k sees x[k]."""

        def one(params: dict, buffers: dict, xb: torch.Tensor) -> torch.Tensor:
            return functional_call(self._base, (params, buffers), (xb,))

        return vmap(one, randomness="different")(self.params, self.buffers, x)

    def train(self, mode: bool = True) -> None:
        self._base.train(mode)

    def fit(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        orders: Sequence[Sequence[torch.Tensor]],
        *,
        lr: float = 1e-3,
    ) -> list[float]:
        """Cross-entropy training on shared inputs `x` (N, ...) with labels `y` (K, N); model k
        takes the mini-batches `orders[k]` (index tensors, equal lengths across models).
        Returns each model's mean loss."""
        if y.shape[0] != len(self) or len(orders) != len(self):
            raise ValueError(f"need labels and batch orders for {len(self)} models")
        self.train(True)
        opt = torch.optim.Adam(list(self.params.values()), lr=lr)
        # Orders are usually built on the CPU; gather needs its index on y's device (CUDA).
        totals = torch.zeros(len(self), dtype=torch.float64, device=y.device)
        count = 0
        for batches in zip(*orders, strict=True):
            idx = torch.stack(list(batches)).to(y.device)  # (K, B)
            logits = self.forward(x[idx])
            yb = torch.gather(y, 1, idx)
            losses = (
                F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="none")
                .view(len(self), -1)
                .mean(dim=1)
            )
            opt.zero_grad(set_to_none=True)
            losses.sum().backward()  # parameters are disjoint: each model gets its own gradient
            opt.step()
            totals += losses.detach().double() * idx.shape[1]
            count += idx.shape[1]
        return (totals / max(count, 1)).tolist()

    @torch.no_grad()
    def write_back(self) -> None:
        for k, model in enumerate(self.models):
            for name, p in model.named_parameters():
                p.copy_(self.params[name][k])
            for name, b in model.named_buffers():
                if name in self.buffers:
                    b.copy_(self.buffers[name][k])
