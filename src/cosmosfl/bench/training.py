"""Training-speed benchmarks: the engine's overhead over a bare PyTorch loop, and the fast path
(bf16 autocast, channels-last, inference batch size, batched same-architecture models)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cosmosfl.bench.common import Report, interleaved, median
from cosmosfl.core.distill import kl_to_targets
from cosmosfl.learners.batched import StackedModels
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import build_model


def images(data_dir: str | None, n_train: int, n_test: int) -> tuple[np.ndarray, ...]:
    """CIFAR-10 images (standardised) when available, else random 32x32 images (speed only)."""
    try:
        from cosmosfl.bench.configs import find_data_dir
        from cosmosfl.data import channel_stats, load_dataset, prepare_images, subsample

        ds = subsample(load_dataset("cifar10", find_data_dir(data_dir)), n_train, n_test, seed=0)
        mean, std = channel_stats(ds.x_train)
        return (
            prepare_images(ds.x_train, mean, std),
            ds.y_train.astype(np.int64),
            prepare_images(ds.x_test, mean, std),
            ds.y_test.astype(np.int64),
            "cifar10",
        )
    except Exception:  # no data here: timings are still meaningful, accuracies are not
        rng = np.random.default_rng(0)
        return (
            rng.standard_normal((n_train, 3, 32, 32)).astype(np.float32),
            rng.integers(0, 10, n_train),
            rng.standard_normal((n_test, 3, 32, 32)).astype(np.float32),
            rng.integers(0, 10, n_test),
            "random",
        )


def net(name: str = "cnn", width: float = 0.5, seed: int = 0) -> torch.nn.Module:
    return build_model(name, in_channels=3, num_classes=10, image_size=32, width=width, seed=seed)


# -- bare loops: what a user would write by hand -------------------------------------------------
def bare_fit(model, x, y, epochs, batch_size, lr=1e-3, seed=0):
    g = torch.Generator().manual_seed(seed)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=g).split(batch_size):
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def bare_distill(model, x, t, epochs, batch_size, lr=1e-3, seed=0):
    g = torch.Generator().manual_seed(seed)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=g).split(batch_size):
            loss = kl_to_targets(model(x[idx]), t[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()


@torch.no_grad()
def bare_predict(model, x, batch_size):
    model.eval()
    return torch.cat([F.softmax(model(c), dim=1) for c in x.split(batch_size)])


def overhead(*, data_dir: str | None = None, quick: bool = False, repeats: int = 5) -> Report:
    n = 256 if quick else 1000
    xtr, ytr, *_ = images(data_dir, n, 100)
    x, y = torch.from_numpy(xtr), torch.from_numpy(ytr)
    targets = F.softmax(torch.randn(n, 10, generator=torch.Generator().manual_seed(0)), dim=1)
    epochs, bs = 1, 32
    base = net()
    learner = TorchLearner(copy.deepcopy(base), num_classes=10, distill_lr=1e-3, batch_size=bs)
    bare = copy.deepcopy(base)
    tn = targets.numpy()
    variants = {
        "fit: TorchLearner": lambda: learner.fit(xtr, ytr, epochs=epochs),
        "fit: bare loop": lambda: bare_fit(bare, x, y, epochs, bs),
        "distill: TorchLearner": lambda: learner.distill(xtr, tn, epochs=epochs, lam=0.0),
        "distill: bare loop": lambda: bare_distill(bare, x, targets, epochs, bs),
        "predict_proba: TorchLearner": lambda: learner.predict_proba(xtr),
        "predict_proba: bare loop": lambda: bare_predict(bare, x, 128),
    }
    times = interleaved(variants, repeats=2 if quick else repeats)
    report = Report(
        "overhead",
        "Engine overhead: TorchLearner vs a bare PyTorch loop (same model, data, epochs)",
        ["call", "TorchLearner s (median)", "bare loop s (median)", "overhead %"],
    )
    data: dict[str, Any] = {"times": times, "n": n, "model": "cnn width 0.5", "batch_size": bs}
    for call in ("fit", "distill", "predict_proba"):
        ours, theirs = median(times[f"{call}: TorchLearner"]), median(times[f"{call}: bare loop"])
        report.rows.append([call, ours, theirs, 100 * (ours / theirs - 1)])
        data[f"{call}_overhead_pct"] = 100 * (ours / theirs - 1)
    report.data = data
    report.notes += [
        f"{n} 32x32 images, cnn at width 0.5, batch 32, 1 epoch, Adam; distill with λ = 0 "
        "(the bare loop has no r_B) and the same gradient clipping; predict in batches of 128.",
        f"Variants interleaved, {repeats} repeats, medians: the ratio is the figure; seconds "
        "are machine-specific.",
    ]
    return report


def _learner(base, precision="fp32", channels_last=False, eval_batch_size=128, seed=0):
    return TorchLearner(
        copy.deepcopy(base),
        num_classes=10,
        batch_size=32,
        eval_batch_size=eval_batch_size,
        precision=precision,
        channels_last=channels_last,
        seed=seed,
    )


def fastpath(
    *, data_dir: str | None = None, quick: bool = False, repeats: int = 2, epochs: int = 2
) -> Report:
    n_train, n_test = (256, 256) if quick else (1000, 1000)
    epochs = 1 if quick else epochs
    xtr, ytr, xte, yte, source = images(data_dir, n_train, n_test)
    report = Report(
        "fastpath",
        "Fast path: images/s relative to the fp32 reference, and accuracy after fixed epochs",
        ["variant", "what", "images/s", "x fp32", "test acc", "Δ acc (points)"],
    )
    data: dict[str, Any] = {"source": source, "n_train": n_train, "epochs": epochs}
    for model_name in ("cnn", "resnet8"):
        base = net(model_name)
        settings = {
            "fp32": {},
            "bf16": {"precision": "bf16"},
            "channels-last": {"channels_last": True},
            "bf16 + channels-last": {"precision": "bf16", "channels_last": True},
        }
        # Speed: one epoch of fit per variant, interleaved; accuracy: fresh learners, E epochs.
        speed_learners = {k: _learner(base, **v) for k, v in settings.items()}
        times = interleaved(
            {k: (lambda lr=lr: lr.fit(xtr, ytr, epochs=1)) for k, lr in speed_learners.items()},
            repeats=1 if quick else repeats,
        )
        acc = {}
        for k, v in settings.items():
            lr = _learner(base, **v)
            lr.fit(xtr, ytr, epochs=epochs)
            acc[k] = float((lr.predict_proba(xte).argmax(1) == yte).mean())
        ref = median(times["fp32"])
        for k in settings:
            t = median(times[k])
            report.rows.append(
                [
                    f"{model_name}: {k}",
                    "train",
                    n_train / t,
                    ref / t,
                    acc[k],
                    100 * (acc[k] - acc["fp32"]),
                ]
            )
        data[model_name] = {"train_times": times, "accuracy": acc}
        # Inference batch size (and bf16) on the same trained weights.
        trained = _learner(base)
        trained.fit(xtr, ytr, epochs=1)
        infer = {}
        for bs in (32, 128, 512, 1024):
            infer[f"predict batch {bs}"] = _learner(trained.model, eval_batch_size=bs)
        infer["predict batch 512 bf16"] = _learner(trained.model, "bf16", eval_batch_size=512)
        ti = interleaved(
            {k: (lambda lr=lr: lr.predict_proba(xte)) for k, lr in infer.items()},
            repeats=1 if quick else repeats,
        )
        ref_i = median(ti["predict batch 128"])
        ref_p = infer["predict batch 128"].predict_proba(xte)
        for k, lr in infer.items():
            diff = float(np.abs(lr.predict_proba(xte) - ref_p).max())
            report.rows.append(
                [
                    f"{model_name}: {k}",
                    "predict",
                    n_test / median(ti[k]),
                    ref_i / median(ti[k]),
                    f"max |Δp| {diff:.1e}",
                    "-",
                ]
            )
        data[model_name]["predict_times"] = ti
    # Batched same-architecture models (the K cluster models of the server).
    for k_models in (5, 10):
        rows = batched_speed(xtr, ytr, k_models, quick=quick, repeats=repeats)
        report.rows += rows
    data["batched"] = [
        r for r in report.rows if "batched" in str(r[0]) or "sequential" in str(r[0])
    ]
    report.data = data
    report.notes += [
        f"Data: {source} ({n_train} training, {n_test} test images), models at width 0.5, batch "
        f"32, Adam 1e-3; accuracy after {epochs} epochs, one seed (differences of ~1-2 points "
        "are seed noise).",
        "x fp32: images/s relative to the fp32 row of the same model, measured interleaved in "
        "one process. images/s are machine-specific (shared 2-core CPU here).",
        "batched: K models stacked with torch.func (stack_module_state + vmap), one "
        "forward/backward for all K, vs the same K models trained one after another.",
    ]
    return report


def stacked_vs_sequential(
    name: str,
    k_models: int,
    *,
    width: float,
    batch_size: int,
    steps: int,
    device: torch.device | str = "cpu",
    repeats: int = 2,
    x: torch.Tensor | None = None,
    y: torch.Tensor | None = None,
) -> dict[str, list[float]]:
    """Seconds of training K same-architecture models for `steps` Adam steps each: stacked
    (`StackedModels`, one vmapped forward/backward for all K) vs one after another, interleaved.
    Random 32x32 inputs unless `x`, `y` (at least batch_size * steps of them) are given."""
    n = batch_size * steps
    if x is None or y is None:
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g)
    xs, ys = x[:n].to(device), y[:n].to(device)
    base = [net(name, width=width, seed=s).to(device) for s in range(k_models)]
    labels = ys.expand(k_models, n).contiguous()

    def orders() -> list[list[torch.Tensor]]:
        g = torch.Generator().manual_seed(0)
        return [
            [i.to(device) for i in torch.randperm(n, generator=g).split(batch_size)]
            for _ in range(k_models)
        ]

    def sequential() -> None:
        models = [copy.deepcopy(m) for m in base]
        for m, order in zip(models, orders(), strict=True):
            m.train()
            opt = torch.optim.Adam(m.parameters(), lr=1e-3)
            for idx in order:
                loss = F.cross_entropy(m(xs[idx]), ys[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

    def stacked() -> None:
        StackedModels([copy.deepcopy(m) for m in base]).fit(xs, labels, orders())

    return interleaved({"sequential": sequential, "stacked": stacked}, repeats=repeats)


def batched_speed(x, y, k_models, *, quick, repeats) -> list[list[Any]]:
    n = min(len(x), 512 if quick else 1000)
    steps = n // 32
    t = stacked_vs_sequential(
        "cnn",
        k_models,
        width=0.5,
        batch_size=32,
        steps=steps,
        repeats=1 if quick else repeats,
        x=torch.from_numpy(x),
        y=torch.from_numpy(y),
    )
    seq, bat = median(t["sequential"]), median(t["stacked"])
    n = 32 * steps
    return [
        [f"{k_models} cnn models: sequential", "train", k_models * n / seq, 1.0, "-", "-"],
        [
            f"{k_models} cnn models: batched (vmap)",
            "train",
            k_models * n / bat,
            seq / bat,
            "-",
            "-",
        ],
    ]
