"""TorchLearner: any `nn.Module` that maps inputs to class logits, behind the Learner contract."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cosmosfl.core.constraints import Constraint, Custom, Interval, Options
from cosmosfl.core.distill import CONSISTENCY_TARGETS, consistency_loss, kl_to_targets
from cosmosfl.data.augment import Neighbours
from cosmosfl.learners.base import (
    Capabilities,
    Learner,
    validate_distill_inputs,
    validate_fit_inputs,
)

# Re-exported: these lived here before learners/device.py, and older code imports them here.
from cosmosfl.learners.device import DEVICES as DEVICES
from cosmosfl.learners.device import DeviceUnavailableError as DeviceUnavailableError
from cosmosfl.learners.device import resolve_device as resolve_device
from cosmosfl.learners.torch_params import ModelParameters

# "fp32": exact float32 everywhere (the reproducible reference). "bf16": forward passes under
# bfloat16 autocast (CPU AMX / CUDA tensor cores); losses, optimizer and weights stay float32.
PRECISIONS = ("fp32", "bf16")
# What the neighbour (augmented) forward pass of r_B does to BatchNorm running statistics:
# "update" lets it move them (about half of them then come from augmented inputs; the
# behaviour before this option existed), "frozen" restores them after the pass, so evaluation
# uses statistics of clean inputs only. Batch statistics normalise the pass either way.
NEIGHBOUR_BN = ("update", "frozen")

# What TorchLearner's settings allow, written once: the learner checks them before it is built
# (beside three of its own, `TorchLearner.parameter_constraints`), and the config's `clients`
# section (experiment/schema.py) declares these same objects, so `clients.lr = 0` and
# `TorchLearner(lr=0)` are refused by one rule.
LEARNER_CONSTRAINTS: dict[str, Constraint] = {
    "lr": Interval(float, 0, closed="neither"),
    "distill_lr": Interval(float, 0, closed="neither"),
    "batch_size": Interval(int, 1),
    "eval_batch_size": Interval(int, 1),
    "precision": Options(PRECISIONS),
    "consistency_samples": Interval(int, 1, symbol="|S|"),
    "consistency_target": Options(CONSISTENCY_TARGETS),
    "neighbour_bn": Options(NEIGHBOUR_BN),
}

LossTerm = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""An extra term of a training batch's loss: (inputs of the batch, the model's logits) -> a
scalar tensor (see `TorchLearner.fit`)."""


# Training steps on fewer samples run in the default layout on CPU (`_small_batch_layout`).
SMALL_CHANNELS_LAST_BATCH = 8


class TorchLearner(ModelParameters, Learner):
    """Trains a PyTorch classifier with the paper's recipe (docs/cosmos.md, "Choices where the
    paper is silent").

    A fresh Adam optimizer per call (lr 1e-3 on true labels, 1e-4 on pseudo-labels), no weight
    decay, gradient-norm clipping on distillation steps, data reshuffled every epoch, inference
    in large batches without augmentation. Randomness (shuffling, augmentation, dropout) comes
    from the learner's own seed, so results do not depend on the order clients are served in.
    """

    parameter_constraints: ClassVar[dict[str, Constraint]] = {
        **LEARNER_CONSTRAINTS,
        "num_classes": Interval(int, 2, none="inferred from the model's last layer"),
        "clip_norm": Interval(float, 0, closed="neither", none="no clipping"),
        "channels_last": Custom(lambda v: isinstance(v, bool), "use True or False"),
    }
    capabilities: ClassVar[Capabilities] = Capabilities(torch_model=True, consistency=True)
    # Augmentations are functions of (batch, generator): a clone uses the same ones.
    shared_parameters: ClassVar[tuple[str, ...]] = ("augmentation", "train_augmentation")

    def __init__(
        self,
        model: nn.Module,
        *,
        num_classes: int | None = None,
        lr: float = 1e-3,
        distill_lr: float = 1e-4,
        batch_size: int = 32,
        eval_batch_size: int = 128,
        clip_norm: float | None = 1.0,
        augmentation: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
        consistency_samples: int = 1,
        device: str | torch.device = "cpu",
        seed: int = 0,
        precision: str = "fp32",
        channels_last: bool = False,
        consistency_target: str = "live",
        neighbour_bn: str = "update",
        train_augmentation: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
    ) -> None:
        # Parameters are stored as given (learners/parameters.py), except the two the engines
        # read as the contract's attributes: the resolved device and the number of classes.
        self.device = resolve_device(device)
        self.precision = precision
        # Channels-last (NHWC) lets oneDNN / cuDNN pick faster convolution kernels.
        self.channels_last = channels_last
        self.model = model.to(self.device)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.num_classes = int(num_classes) if num_classes is not None else _infer_classes(model)
        self.lr = lr
        self.distill_lr = distill_lr
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.clip_norm = clip_norm
        self.augmentation = augmentation
        # The neighbours x' of r_B: by default the paper's image augmentation for image
        # batches and a per-feature noise ball for feature vectors (data/augment.py).
        self._neighbours = augmentation if augmentation is not None else Neighbours()
        self.consistency_samples = consistency_samples
        self.consistency_target = consistency_target
        self.neighbour_bn = neighbour_bn
        # Random transformation of private training batches in `fit` (e.g. crop + flip); the
        # same for every algorithm, None = train on the images as they are.
        self.train_augmentation = train_augmentation
        self.seed = seed
        self._generator = torch.Generator().manual_seed(int(self.seed))
        self._contiguous_now = False  # see _small_batch_layout
        self._skip_single = _has_batchnorm(model)  # BatchNorm cannot train on one sample

    # -- helpers -----------------------------------------------------------------------------
    def _tensor(self, a: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return self._layout(torch.as_tensor(np.asarray(a)).to(self.device, dtype))

    def _layout(self, t: torch.Tensor) -> torch.Tensor:
        if self.channels_last and t.dim() == 4:
            if self._contiguous_now:
                return t.contiguous()
            return t.contiguous(memory_format=torch.channels_last)
        return t

    @contextlib.contextmanager
    def _small_batch_layout(self, n: int) -> Iterator[None]:
        """A training step on fewer than SMALL_CHANNELS_LAST_BATCH samples (an epoch's last
        batch) runs in the default layout on CPU: on torch 2.13.0's CPU the channels-last
        backward of a 1x1 stride-2 convolution was reported to corrupt the heap at batch size 3
        and abort the process (issue 37). Parameters keep their objects (the optimizer's)."""
        if not (self.channels_last and self.device.type == "cpu" and n < SMALL_CHANNELS_LAST_BATCH):
            yield
            return
        self.model.to(memory_format=torch.contiguous_format)
        self._contiguous_now = True
        try:
            yield
        finally:
            self._contiguous_now = False
            self.model.to(memory_format=torch.channels_last)

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _batches(self, n: int, epochs: int) -> Iterator[torch.Tensor]:
        for _ in range(int(epochs)):
            order = torch.randperm(n, generator=self._generator)
            yield from order.split(self.batch_size)

    def _run(self, step: Callable[[], dict[str, float]]) -> dict[str, float]:
        # Dropout and other global-RNG users draw from a stream derived from this learner's own
        # generator, so a call's randomness depends only on the learner's seed and history.
        seed = int(torch.randint(0, 2**62, (1,), generator=self._generator))
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):  # restores the caller's RNG state after
            torch.default_generator.manual_seed(seed)
            if cuda:
                torch.cuda.default_generators[cuda[0]].manual_seed(seed)
            return step()

    # -- the contract ------------------------------------------------------------------------
    def fit(
        self,
        x: np.ndarray,
        y: np.ndarray,
        *,
        epochs: int = 1,
        frozen: Collection[str] = (),
        extra_losses: Sequence[LossTerm] = (),
    ) -> dict[str, float]:
        """Cross-entropy epochs on (x, y). Two torch-level hooks, for client handlers that
        train differently (parameter-sharing baselines); plain training at their defaults:

        - `frozen`: names of parameters held fixed (e.g. the head, `head_names`);
        - `extra_losses`: terms `term(x_batch, logits)` added in order to each batch's loss
          (x_batch without train_augmentation), e.g. learners/torch_terms.py's proximal and
          distillation terms. The reported loss is the cross-entropy alone.
        """
        validate_fit_inputs(x, y, self.num_classes)
        xs, ys = self._tensor(x), self._tensor(y, torch.long)
        named = dict(self.model.named_parameters())
        frozen = set(frozen)
        unknown = sorted(frozen - set(named))
        if unknown:
            raise ValueError(f"frozen names no parameter of the model: {unknown}")

        def step() -> dict[str, float]:
            self.model.train()
            if frozen:
                for n in frozen:
                    named[n].requires_grad_(False)
                params = [p for n, p in named.items() if n not in frozen]
                opt = torch.optim.Adam(params, lr=self.lr)
            else:
                opt = torch.optim.Adam(self.model.parameters(), lr=self.lr)
            total, count = 0.0, 0
            try:
                for idx in self._batches(len(xs), epochs):
                    if len(idx) < 2 and self._skip_single:
                        continue
                    with self._small_batch_layout(len(idx)):
                        xb = self._layout(xs[idx])
                        if self.train_augmentation is not None:
                            xb = self._layout(self.train_augmentation(xb, self._generator))
                        with self._autocast():
                            logits = self.model(xb)
                            loss = F.cross_entropy(logits, ys[idx])
                        total += loss.item() * len(idx)
                        for term in extra_losses:
                            loss = loss + term(self._layout(xs[idx]), logits)
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                        opt.step()
                    count += len(idx)
            finally:
                for n in frozen:
                    named[n].requires_grad_(True)
            return {"loss": total / max(count, 1)}

        return self._run(step)

    def check_neighbours(self, x: np.ndarray) -> None:
        """Raise ValueError, saying what to change, when this learner cannot make r_B's
        neighbours x' of inputs like `x` (a few samples): run before training with λ > 0, so
        a mismatch fails before round 1 instead of after every client has trained."""
        sample = self._tensor(np.asarray(x)[:2])
        try:
            out = self._neighbours(sample, torch.Generator().manual_seed(0))
        except (ValueError, TypeError, RuntimeError) as err:
            raise ValueError(
                f"cannot make the neighbours x' of the consistency term r_B for inputs of shape "
                f"{tuple(sample.shape[1:])} per sample: the augmentation "
                f"({type(self._neighbours).__name__}) raised: {err}. Set lam=0 (no consistency "
                "term), or give augmentation= a callable (batch, generator) -> neighbours for "
                "this kind of input (cosmosfl.data.FeatureNoise() for feature vectors)"
            ) from None
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(sample.shape):
            raise ValueError(
                f"the augmentation ({type(self._neighbours).__name__}) must return neighbours of "
                f"the input's shape {tuple(sample.shape)}, got "
                f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}; "
                "fix it, or set lam=0 (no consistency term)"
            )

    @torch.no_grad()
    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        self.model.eval()
        xs = torch.as_tensor(np.asarray(x))
        with self._autocast():
            out = [
                F.softmax(
                    self.model(self._layout(chunk.to(self.device, torch.float32))).float(), dim=1
                ).cpu()
                for chunk in xs.split(self.eval_batch_size)
            ]
        return torch.cat(out).numpy().astype(np.float32)

    def distill(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        weights: np.ndarray | None = None,
        *,
        epochs: int = 1,
        lam: float = 0.0,
    ) -> dict[str, float]:
        validate_distill_inputs(x, targets, weights, self.num_classes)
        xs, ts = self._tensor(x), self._tensor(targets)
        ws = None if weights is None else self._tensor(weights)

        def step() -> dict[str, float]:
            self.model.train()
            opt = torch.optim.Adam(self.model.parameters(), lr=self.distill_lr)
            # Per-epoch means of the KL term and of r_B, so a caller can see whether the model
            # fits its teacher (first vs last epoch), not only their average.
            kl_epochs, reg_epochs = [], []
            for _ in range(int(epochs)):
                total, total_reg, count = 0.0, 0.0, 0
                for idx in self._batches(len(xs), 1):
                    if len(idx) < 2 and self._skip_single:
                        continue
                    with self._small_batch_layout(len(idx)):
                        xb, wb = self._layout(xs[idx]), None if ws is None else ws[idx]
                        with self._autocast():
                            clean = self.model(xb)
                            main = kl_to_targets(clean.float(), ts[idx], wb)
                            loss = main
                            if lam > 0:
                                reg = self._consistency(xb, clean.float(), wb)
                                loss = main + lam * reg
                                total_reg += float(reg.item()) * len(idx)
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                        if self.clip_norm is not None:
                            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
                        opt.step()
                    total += main.item() * len(idx)
                    count += len(idx)
                kl_epochs.append(total / max(count, 1))
                reg_epochs.append(total_reg / max(count, 1))
            return _loss_summary(kl_epochs, reg_epochs)

        return self._run(step)

    def _consistency(
        self, xb: torch.Tensor, clean: torch.Tensor, wb: torch.Tensor | None
    ) -> torch.Tensor:
        """r_B over |S| sampled neighbours of the batch. Each view gets its own forward pass, so
        BatchNorm's batch statistics for the main term come from clean x."""
        with self._frozen_bn() if self.neighbour_bn == "frozen" else contextlib.nullcontext():
            return sum(  # type: ignore[return-value]
                consistency_loss(
                    self.model(self._layout(self._neighbours(xb, self._generator))).float(),
                    clean,
                    wb,
                    target=self.consistency_target,
                )
                for _ in range(self.consistency_samples)
            )

    # -- checkpoints -------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "model": copy.deepcopy(self.model.state_dict()),
            "generator": self._generator.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self._generator.set_state(state["generator"])


def _loss_summary(kl: list[float], reg: list[float]) -> dict[str, float]:
    """Mean over epochs (`kl`, `consistency`) and the first and last epoch's means."""
    if not kl:
        return {"kl": 0.0, "consistency": 0.0}
    return {
        "kl": float(np.mean(kl)),
        "consistency": float(np.mean(reg)),
        "kl_first": kl[0],
        "kl_last": kl[-1],
        "consistency_first": reg[0],
        "consistency_last": reg[-1],
    }


def _has_batchnorm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def _infer_classes(model: nn.Module) -> int:
    last = [m for m in model.modules() if isinstance(m, nn.Linear | nn.Conv2d)]
    if not last:
        raise ValueError("cannot infer num_classes from the model; pass num_classes=")
    layer = last[-1]
    return int(layer.out_features if isinstance(layer, nn.Linear) else layer.out_channels)
