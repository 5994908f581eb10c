"""Time to accuracy: wall time for COSMOS to reach a personalised accuracy on the CIFAR-10 CPU
config with the paper's model choices vs cosmosfl's recommended CPU choices, and the cheap
part of that question: what one training image costs with each choice of model."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cosmosfl.bench.common import Report, interleaved, median
from cosmosfl.bench.configs import cifar_config

# The paper's CIFAR-10 choices (section 6; docs/cosmos.md): AlexNet / ResNet18 / MobileNetV2 /
# SqueezeNet at full size on clients, VGG16 server, 5 epochs everywhere, lr 1e-4 on
# pseudo-labels.
PAPER = [
    "clients.models={alexnet: 0.25, resnet18: 0.25, mobilenetv2: 0.25, squeezenet: 0.25}",
    "clients.width=1.0",
    "clients.distill_lr=1.0e-4",
    "algorithm.server_model=vgg16",
    "algorithm.server_lr=1.0e-4",
    "algorithm.local_epochs=5",
    "algorithm.server_epochs=5",
    "algorithm.distill_epochs=5",
]
PAPER_MODELS = ("alexnet", "resnet18", "mobilenetv2", "squeezenet", "vgg16")
CPU_MODELS = (("cnn", 0.5), ("resnet8", 0.5), ("squeezenet", 0.5), ("cnn", 1.0))


class _OverBudget(Exception):
    pass


def _time_box(clients: list[Any], names: list[str], deadline: float, log: list[dict]) -> None:
    """Make every client refuse work once `deadline` (perf_counter) has passed, and log each
    task's duration: the budget then holds inside a round (a paper-choice round can take hours),
    and what was done before it ran out is measured per client, model and task."""
    for client, name in zip(clients, names, strict=True):
        original = client.handle

        def handle(message: Any, _orig: Any = original, _cid: int = client.id, _m: str = name):
            if time.perf_counter() > deadline:
                raise _OverBudget
            start = time.perf_counter()
            reply = _orig(message)
            log.append(
                {"client": _cid, "model": _m, "task": message.task,
                 "seconds": time.perf_counter() - start}
            )  # fmt: skip
            return reply

        client.handle = handle


def time_to_accuracy(
    *,
    data_dir: str | None = None,
    config: str | None = None,
    target: float = 0.65,
    budget_s: float = 1800.0,
    max_rounds: int = 10,
    quick: bool = False,
    choices: tuple[str, ...] = ("recommended CPU choices", "paper choices"),
) -> Report:
    """Run each choice round by round until the cluster models' mean accuracy reaches `target`
    or `budget_s` wall seconds pass (checked before every client task, so a round that would
    outlast the budget is cut short and reported as unfinished, with what it did finish)."""
    from cosmosfl.engines.simulation import InProcessEngine
    from cosmosfl.experiment.build import build_experiment

    extra = ["data.max_train=1500", "algorithm.pretrain_epochs=1"] if quick else []
    variants = {"recommended CPU choices": [], "paper choices": PAPER}
    unknown = sorted(set(choices) - set(variants))
    if unknown:
        raise ValueError(f"unknown choices {unknown}; allowed: {', '.join(variants)}")
    report = Report(
        "time-to-accuracy",
        f"Time to {100 * target:.0f} % personalised accuracy (cluster models, CIFAR-10 CPU)",
        ["choices", "reached", "seconds", "rounds done", "best accuracy", "per round s"],
    )
    data: dict[str, Any] = {"target": target, "budget_s": budget_s, "curves": {}, "tasks": {}}
    for name in choices:
        overrides = variants[name]
        cfg = cifar_config(data_dir, config, [*extra, *overrides, f"rounds={max_rounds}"])
        start = time.perf_counter()
        exp = build_experiment(cfg)
        tasks: list[dict] = []
        _time_box(exp.clients, exp.client_models, start + budget_s, tasks)
        engine = InProcessEngine(exp.clients, exp.public_x, seed=cfg.seed, device=cfg.device)
        curve, reached, cut = [], None, False
        try:
            for t in range(1, max_rounds + 1):
                rec = engine.run_round(exp.algorithm, t, max_rounds)  # type: ignore[arg-type]
                acc = rec["mean_accuracy"]["cluster_model"]
                curve.append((t, time.perf_counter() - start, acc))
                if acc >= target:
                    reached = curve[-1]
                    break
                if time.perf_counter() - start > budget_s:
                    break
        except _OverBudget:
            cut = True
        finally:
            engine.close()
        elapsed = time.perf_counter() - start
        data["curves"][name] = curve
        data["tasks"][name] = tasks
        if reached:
            status = "yes"
        elif cut:
            status = f"no: budget {budget_s:.0f} s ran out in round {len(curve) + 1}"
        else:
            status = f"no (budget {budget_s:.0f} s)"
        report.rows.append(
            [
                name,
                status,
                reached[1] if reached else elapsed,
                len(curve),
                max((a for _, _, a in curve), default=float("nan")),
                np.mean(np.diff([0.0] + [s for _, s, _ in curve])) if curve else float("nan"),
            ]
        )
        if cut:
            done: dict[str, list[float]] = {}
            for row in tasks:
                key = f"{row['task']} {row['model']}"
                done.setdefault(key, []).append(row["seconds"])
            summary = "; ".join(
                f"{k}: {len(v)} x {np.mean(v):.3g} s" for k, v in sorted(done.items())
            )
            report.notes.append(
                f"{name}: client tasks finished before the budget ran out (count x mean "
                f"seconds): {summary or 'none'}."
            )
    report.data = data
    report.notes.append(
        "Wall seconds include data loading; machine-specific. One seed; the round that crosses "
        "the target ends the run. The budget is checked before every client task."
    )
    return report


def model_cost(*, quick: bool = False, repeats: int = 2, data_dir: str | None = None) -> Report:
    """Training images/s of the paper's models vs the recommended CPU models, side by side."""
    import torch
    import torch.nn.functional as F

    from cosmosfl.models.registry import build_model

    n = 32 if quick else 128
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((n, 3, 32, 32)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, n))
    choices = [(m, 1.0) for m in PAPER_MODELS] + list(CPU_MODELS)
    models = {
        f"{m} x{w}": build_model(m, in_channels=3, num_classes=10, image_size=32, width=w, seed=0)
        for m, w in choices
    }

    def epoch(model: torch.nn.Module) -> None:
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for idx in torch.randperm(n).split(32):
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()

    times = interleaved(
        {k: (lambda m=m: epoch(m)) for k, m in models.items()}, repeats=1 if quick else repeats
    )
    ref = median(times["cnn x0.5"])
    report = Report(
        "model-cost",
        "Training cost per image: the paper's models vs the recommended CPU models",
        ["model", "parameters", "images/s", "x cost of cnn x0.5"],
    )
    for k, m in models.items():
        report.rows.append(
            [
                k,
                sum(p.numel() for p in m.parameters()),
                n / median(times[k]),
                median(times[k]) / ref,
            ]
        )
    report.data = {"times": times, "n": n}
    report.notes.append(
        "32x32 inputs, batch 32, Adam; interleaved in one process; images/s machine-specific."
    )
    return report
