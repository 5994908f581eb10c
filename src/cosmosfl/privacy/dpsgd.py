"""DP-SGD for torch learners, through Opacus: every fit on private records clips each
sample's gradient to `max_grad_norm`, adds Gaussian noise of `noise_multiplier` × that norm,
and draws its batches by Poisson sampling (Abadi et al. 2016, "Deep Learning with
Differential Privacy"); the site's accountant is charged before the fit runs.

Distillation and predictions touch only U and what the federation sent, so they are the
wrapped `TorchLearner`'s own (post-processing). BatchNorm mixes the samples of a batch, so a
model with it is rebuilt once with GroupNorm (Opacus's `ModuleValidator.fix`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from cosmosfl.core.constraints import Constraint, Interval
from cosmosfl.learners.base import Capabilities, Learner, validate_fit_inputs
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.privacy.accountant import Charge, SiteAccountant
from cosmosfl.privacy.deps import require


def dpsgd_charge(n: int, batch_size: int, epochs: int, noise_multiplier: float) -> Charge:
    """The charge of one DP-SGD fit on `n` records: Opacus's Poisson sampler draws each batch
    with rate 1 / ceil(n / batch_size), as many batches per epoch."""
    batches = max(1, math.ceil(n / batch_size))
    return Charge("dpsgd", noise_multiplier, sample_rate=1.0 / batches, steps=epochs * batches)


class DPSGDLearner(Learner):
    """A TorchLearner whose `fit` is DP-SGD; everything else is the wrapped learner's."""

    mechanism = "dpsgd"
    parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "noise_multiplier": Interval(float, 0),
        "max_grad_norm": Interval(float, 0, closed="neither"),
    }
    capabilities: ClassVar[Capabilities] = TorchLearner.capabilities
    # A clone (a model slot) is charged to the same site accountant.
    shared_parameters: ClassVar[tuple[str, ...]] = ("accountant",)

    def __init__(
        self,
        inner: TorchLearner,
        accountant: SiteAccountant,
        *,
        noise_multiplier: float,
        max_grad_norm: float = 1.0,
    ) -> None:
        opacus = require("opacus")
        validator = opacus.validators.ModuleValidator
        if not validator.is_valid(inner.model):
            inner.model = validator.fix(inner.model).to(inner.device)
        self.inner = inner
        self.accountant = accountant
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.num_classes = inner.num_classes
        self._generator = torch.Generator().manual_seed(int(inner.seed) ^ 0x5D9)
        # Opacus's own RDP accountant sees every step it takes (tests compare it with ours).
        self.opacus_accountant = opacus.accountants.RDPAccountant()

    def __getattr__(self, name: str) -> Any:
        # Model details (model, head_names, batch_size, ...) are the wrapped learner's.
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def fit(
        self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1, **hooks: Any
    ) -> dict[str, float]:
        """DP-SGD epochs on (x, y), or nothing (the model kept) if the budget would be exceeded."""
        if any(hooks.values()):
            raise ValueError(f"DP-SGD fits take no extra training hooks ({', '.join(hooks)})")
        validate_fit_inputs(x, y, self.num_classes)
        charge = dpsgd_charge(len(x), self.inner.batch_size, epochs, self.noise_multiplier)
        if not self.accountant.try_spend(charge):
            return self.accountant.ledger(refused=True)
        seed = int(torch.randint(0, 2**62, (1,), generator=self._generator))
        with torch.random.fork_rng():  # Poisson sampling and noise draw from the global RNG
            torch.manual_seed(seed)
            loss = self._train(x, y, epochs)
        return {"loss": loss, **self.accountant.ledger(refused=False)}

    def _train(self, x: np.ndarray, y: np.ndarray, epochs: int) -> float:
        opacus = require("opacus")
        inner, model = self.inner, self.inner.model
        data = torch.utils.data.TensorDataset(
            torch.as_tensor(np.asarray(x), dtype=torch.float32),
            torch.as_tensor(np.asarray(y), dtype=torch.long),
        )
        loader = torch.utils.data.DataLoader(data, batch_size=inner.batch_size)
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=inner.lr)
        with warnings.catch_warnings():
            # Opacus warns on every engine that secure_mode (a cryptographic RNG) is off: runs
            # are seeded on purpose; and torch on full backward hooks over inputs without grad.
            warnings.simplefilter("ignore", UserWarning)
            return self._steps(opacus, model, optimizer, loader, epochs)

    def _steps(self, opacus: Any, model: Any, optimizer: Any, loader: Any, epochs: int) -> float:
        inner = self.inner
        engine = opacus.PrivacyEngine(accountant="rdp")
        engine.accountant = self.opacus_accountant
        private, dp_optimizer, dp_loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=self.noise_multiplier,
            max_grad_norm=self.max_grad_norm,
            poisson_sampling=True,
        )
        total, count = 0.0, 0
        try:
            for _ in range(epochs):
                for xb, yb in dp_loader:
                    if not len(xb):  # an empty Poisson batch: skipping it releases less
                        continue
                    dp_optimizer.zero_grad(set_to_none=True)
                    loss = F.cross_entropy(private(xb.to(inner.device)), yb.to(inner.device))
                    loss.backward()
                    dp_optimizer.step()
                    total, count = total + loss.item() * len(xb), count + len(xb)
        finally:
            dp_optimizer.zero_grad(set_to_none=True)
            private._close()  # hooks off: distillation and predictions are plain torch again
        return total / max(count, 1)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.inner.predict_proba(x)

    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        return self.inner.distill(x, targets, weights, epochs=epochs, lam=lam)

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
        return self.inner.evaluate(x, y)

    def check_neighbours(self, x: np.ndarray) -> None:
        self.inner.check_neighbours(x)

    def get_state(self) -> dict[str, Any]:
        return {
            "inner": self.inner.get_state(),
            "accountant": self.accountant.get_state(),
            "generator": self._generator.get_state(),
            "opacus_history": list(self.opacus_accountant.history),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.inner.set_state(state["inner"])
        self.accountant.set_state(state["accountant"])
        self._generator.set_state(state["generator"])
        self.opacus_accountant.history = list(state["opacus_history"])
