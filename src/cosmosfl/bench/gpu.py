"""The GPU run (issue 14): what the paper's setting costs on one GPU, in one prepared call.

Three phases, each with a share of one wall-clock budget (default 450 s, so the whole call
stays under 8 minutes with start-up): training images/s of the paper's models through
`TorchLearner.fit` (fp32 / bf16 autocast x NCHW / channels-last, native 32 px), K
same-architecture models stacked with vmap against a loop, and one round of
configs/paper-cifar10.yaml, cut at the budget (what ran is recorded, and the cut phase is
projected from the clients it finished). `quick` ("toy") shrinks every size so the same code
runs on a CPU in seconds; without it a CUDA device is required.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from cosmosfl.bench.accuracy import PAPER_MODELS
from cosmosfl.bench.common import Report, interleaved, median
from cosmosfl.bench.rounds import PAPER_REFERENCE, cifar_dir, paper_round
from cosmosfl.bench.training import stacked_vs_sequential
from cosmosfl.learners.device import DeviceUnavailableError
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import build_model, count_parameters

VARIANTS = (
    ("fp32", False),
    ("fp32", True),
    ("bf16", False),
    ("bf16", True),
)
# Shares of the budget at which each phase must have ended; the round gets the rest, less a
# reserve for the phase that may be running at the deadline (server distillation of the K
# VGG16 models, about a minute at most, is checked only at its start) and writing the JSON.
MODELS_SHARE, STACKED_SHARE, RESERVE_S = 0.25, 0.4, 60.0


@dataclass(frozen=True)
class Sizes:
    width: float
    batch_sizes: tuple[int, ...]
    steps: int  # timed optimizer steps per measurement (after one warm-up call)
    repeats: int
    stacked: tuple[tuple[str, int], ...]  # (model, K) same-architecture groups
    stacked_batch: int
    round_overrides: tuple[str, ...]
    synthetic: tuple[int, int]  # train / test images when CIFAR-10 is not found
    budget_s: float


# The paper config's groups: 25 clients, half MobileNetV2 and half SqueezeNet, K = 5 VGG16
# server models.
FULL = Sizes(
    width=1.0,
    batch_sizes=(32, 256),
    steps=20,
    repeats=3,
    stacked=(("mobilenetv2", 12), ("squeezenet", 13), ("vgg16", 5)),
    stacked_batch=32,
    round_overrides=(),
    synthetic=(50_000, 10_000),
    budget_s=450.0,
)
TOY = Sizes(
    width=0.125,
    batch_sizes=(4,),
    steps=2,
    repeats=1,
    stacked=(("squeezenet", 2),),
    stacked_batch=4,
    round_overrides=(
        "data.num_clients=5",
        "clients.width=0.125",
        "algorithm.server_width=0.125",
        "algorithm.target_clusters=2",
        "algorithm.pretrain_epochs=1",
        "algorithm.local_epochs=1",
        "algorithm.server_epochs=1",
        "algorithm.distill_epochs=1",
    ),
    synthetic=(300, 100),
    budget_s=600.0,
)


def pick_device(quick: bool) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    if not quick:
        raise DeviceUnavailableError(
            f"the GPU benchmark needs a CUDA device and torch {torch.__version__} sees none "
            "(a CPU-only build, no driver, or CUDA_VISIBLE_DEVICES hides the GPUs); "
            "--quick runs it at toy size on the CPU"
        )
    return torch.device("cpu")


def model_speed(
    sizes: Sizes, device: torch.device, deadline: float, log: Any = print
) -> dict[str, Any]:
    """images/s of `TorchLearner.fit` (the path a round runs, loss.item() per step included)
    for each paper model, precision, layout and batch size, variants interleaved per model.
    Without CUDA the bf16 variants are listed as skipped: CPUs without bf16 convolution
    kernels run them several times slower (benchmarks/README.md, fastpath)."""
    rng = np.random.default_rng(0)
    timed = [v for v in VARIANTS if device.type == "cuda" or v[0] == "fp32"]
    out: dict[str, Any] = {}
    for name in PAPER_MODELS:
        base = build_model(
            name, in_channels=3, num_classes=10, image_size=32, width=sizes.width, seed=0
        )
        entry: dict[str, Any] = {"parameters": count_parameters(base), "variants": []}
        out[name] = entry
        for bs in sizes.batch_sizes:
            if time.perf_counter() > deadline:
                entry["skipped"] = f"budget: batch {bs} and above not measured"
                break
            n = bs * sizes.steps
            x = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
            y = rng.integers(0, 10, n)
            learners = {
                (p, cl): TorchLearner(
                    copy.deepcopy(base),
                    num_classes=10,
                    batch_size=bs,
                    device=device,
                    precision=p,
                    channels_last=cl,
                )
                for p, cl in timed
            }
            times = interleaved(
                {k: (lambda lr=lr, x=x, y=y: lr.fit(x, y, epochs=1)) for k, lr in learners.items()},
                repeats=sizes.repeats,
            )
            for (p, cl), t in times.items():
                entry["variants"].append(
                    {
                        "precision": p,
                        "channels_last": cl,
                        "batch_size": bs,
                        "steps": sizes.steps,
                        "images_per_s": n / median(t),
                        "seconds": t,
                    }
                )
            for p, cl in VARIANTS:
                if (p, cl) not in learners:
                    entry["variants"].append(
                        {
                            "precision": p,
                            "channels_last": cl,
                            "batch_size": bs,
                            "skipped": "no CUDA device",
                        }
                    )
            del learners
            _free(device)
        log(f"models: {name} done")
    return out


def stacked_speed(
    sizes: Sizes, device: torch.device, deadline: float, log: Any = print
) -> list[dict[str, Any]]:
    """K same-architecture models trained stacked (vmap) vs one after another, fp32."""
    rows = []
    for name, k in sizes.stacked:
        if time.perf_counter() > deadline:
            rows.append({"model": name, "k": k, "skipped": "budget"})
            continue
        times = stacked_vs_sequential(
            name,
            k,
            width=sizes.width,
            batch_size=sizes.stacked_batch,
            steps=sizes.steps,
            device=device,
            repeats=sizes.repeats,
        )
        images = k * sizes.stacked_batch * sizes.steps
        seq, bat = median(times["sequential"]), median(times["stacked"])
        rows.append(
            {
                "model": name,
                "k": k,
                "batch_size": sizes.stacked_batch,
                "steps": sizes.steps,
                "loop_images_per_s": images / seq,
                "stacked_images_per_s": images / bat,
                "speedup": seq / bat,
                "seconds": times,
            }
        )
        _free(device)
        log(f"stacked: {k} x {name} done")
    return rows


def _free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run(
    *,
    quick: bool = False,
    data_dir: str | None = None,
    config: str | None = None,
    budget_s: float | None = None,
) -> Report:
    """The whole GPU run; `quick` = the toy sizes (any device)."""
    start = time.perf_counter()
    sizes = TOY if quick else FULL
    budget = float(budget_s) if budget_s is not None else sizes.budget_s
    device = pick_device(quick)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its kernels
    log = print
    phase_s = {}
    models = model_speed(sizes, device, start + MODELS_SHARE * budget, log)
    phase_s["models"] = time.perf_counter() - start
    stacked = stacked_speed(sizes, device, start + STACKED_SHARE * budget, log)
    phase_s["stacked"] = time.perf_counter() - start - phase_s["models"]
    paper = paper_round(
        start + budget - RESERVE_S,
        device=device.type,
        overrides=sizes.round_overrides,
        synthetic=sizes.synthetic,
        data_dir=None if quick else cifar_dir(data_dir),
        config=config,
    )
    phase_s["paper_round"] = time.perf_counter() - start - phase_s["models"] - phase_s["stacked"]
    report = Report(
        "gpu-toy" if quick else "gpu",
        "GPU run: paper models' training speed, stacked vs loop, one paper-config round",
        ["what", "variant", "images/s or seconds"],
    )
    for name, entry in models.items():
        for v in entry["variants"]:
            if "skipped" in v:
                continue
            variant = f"{v['precision']}{' + channels-last' if v['channels_last'] else ''}"
            report.rows.append(
                [f"{name} train", f"{variant}, batch {v['batch_size']}", v["images_per_s"]]
            )
    for row in stacked:
        if "skipped" not in row:
            label = f"{row['k']} x {row['model']}"
            report.rows.append([label, "loop", row["loop_images_per_s"]])
            report.rows.append([label, "stacked (vmap)", row["stacked_images_per_s"]])
    for phase, sec in paper["seconds"].items():
        report.rows.append(["paper-config round 1 (s)", phase, sec])
    done = paper["seconds"]["total"] if paper["completed"] else paper["projected_total_s"]
    minutes = done / 60 if done is not None else None
    report.rows.append(
        ["paper-config round 1 (min)", "measured" if paper["completed"] else "projected", minutes]
    )
    ref = PAPER_REFERENCE["minutes_per_round"]
    report.rows.append(
        ["paper's round (min)", PAPER_REFERENCE["hardware"], f"{ref['low']:g}-{ref['high']:g}"]
    )
    report.data = {
        "device": {
            "type": device.type,
            "name": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
        },
        "toy": quick,
        "budget_s": budget,
        "models": models,
        "stacked": stacked,
        "paper_round": paper,
        "round_minutes": minutes,
        "paper_reference": PAPER_REFERENCE,
        "phase_wall_s": phase_s,
        "wall_s": time.perf_counter() - start,
    }
    report.notes += [
        "images/s: TorchLearner.fit on random 32x32 images, one epoch of `steps` batches, "
        "Adam, variants interleaved (median of the repeats after a warm-up call).",
        "paper round: round 1 of configs/paper-cifar10.yaml (pre-training with E0 = 5 etc.); "
        f"paper reference: {PAPER_REFERENCE['minutes_per_round']} min per round on "
        f"{PAPER_REFERENCE['hardware']} (224 px inputs there, 32 px here).",
    ]
    if quick:
        report.notes.append("TOY sizes: checks that the run works; the figures mean nothing.")
    return report
