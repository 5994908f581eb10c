"""What a torch learner does to its model's parameters and BatchNorm statistics besides
training: the classifier head's names, weights in and out (the parameter-sharing baselines),
BatchNorm statistics recomputed for weights set from outside, and held still during r_B's
neighbour pass.

`ModelParameters` is a mixin of `TorchLearner` (learners/torch.py), apart so that each module
reads in one sitting; it needs only the learner's `model`, `device` and `eval_batch_size`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import numpy as np
import torch
from torch import nn


class ModelParameters:
    """The parameter and BatchNorm surface of a torch learner (see the module doc)."""

    model: nn.Module
    device: torch.device
    eval_batch_size: int

    # -- parameters (homogeneous-architecture baselines only) --------------------------------
    def head_names(self) -> list[str]:
        """Parameter names of the classifier head: the last Linear (or Conv2d) layer."""
        layers = [
            (name, m)
            for name, m in self.model.named_modules()
            if isinstance(m, nn.Linear | nn.Conv2d)
        ]
        if not layers:
            raise ValueError("the model has no Linear or Conv2d layer to call its head")
        prefix, layer = layers[-1]
        return [f"{prefix}.{n}" if prefix else n for n, _ in layer.named_parameters()]

    def get_weights(self) -> dict[str, np.ndarray]:
        """Floating-point state (parameters and e.g. BatchNorm statistics) as float32 arrays,
        named and ordered as in `state_dict`; integer buffers (batch counters) stay local."""
        return {
            name: t.detach().cpu().numpy().astype(np.float32, copy=True)
            for name, t in self.model.state_dict().items()
            if t.is_floating_point()
        }

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Load arrays named as `get_weights` returns them (all of them, same shapes)."""
        state = self.model.state_dict()
        expected = {n for n, t in state.items() if t.is_floating_point()}
        if set(weights) != expected:
            missing, extra = sorted(expected - set(weights)), sorted(set(weights) - expected)
            raise ValueError(f"weights do not match the model: missing {missing}, extra {extra}")
        for name, array in weights.items():
            if tuple(array.shape) != tuple(state[name].shape):
                raise ValueError(
                    f"weight {name!r} has shape {tuple(array.shape)}, "
                    f"the model has {tuple(state[name].shape)}"
                )
        with torch.no_grad():
            for name, array in weights.items():
                state[name].copy_(torch.as_tensor(np.asarray(array)).to(state[name].dtype))

    @torch.no_grad()
    def recalibrate_batchnorm(self, x: np.ndarray) -> dict[str, float]:
        """Recompute BatchNorm running statistics for the current weights from `x` (one pass,
        exact averages, no training): needed when weights were set from outside (pFedHN)."""
        norms = [m for m in self.model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        if not norms:
            return {"recalibrated": 0.0}
        momenta = [m.momentum for m in norms]
        self.model.eval()
        for m in norms:
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the pass
            m.train()
        try:
            for chunk in torch.as_tensor(np.asarray(x)).split(self.eval_batch_size):
                self.model(chunk.to(self.device, torch.float32))
        finally:
            for m, momentum in zip(norms, momenta, strict=True):
                m.momentum = momentum
            self.model.eval()
        return {"recalibrated": float(len(norms))}

    # -- BatchNorm during r_B ----------------------------------------------------------------
    @contextlib.contextmanager
    def _frozen_bn(self) -> Iterator[None]:
        """BatchNorm layers normalise with batch statistics but leave their running statistics
        as they are. Momentum 0 makes the layer's own update a no-op (running statistics are
        saved for backward, so they must not be rewritten after the pass); the batch counter
        is put back."""
        norms = [m for m in self.model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        saved = [(m.momentum, m.num_batches_tracked) for m in norms]
        counts = [None if c is None else c.clone() for _, c in saved]
        for m in norms:
            m.momentum = 0.0
        try:
            yield
        finally:
            with torch.no_grad():
                for m, (momentum, counter), count in zip(norms, saved, counts, strict=True):
                    m.momentum = momentum
                    if counter is not None and count is not None:
                        counter.copy_(count)
