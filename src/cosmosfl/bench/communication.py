"""Communication: bytes per client per round under each payload codec, against FedAvg, and the
accuracy each codec costs on the CIFAR-10 CPU config."""

from __future__ import annotations

from typing import Any

import numpy as np

from cosmosfl.bench.common import Report
from cosmosfl.bench.configs import cifar_config
from cosmosfl.core.codecs import encode_probs
from cosmosfl.models.registry import build_model

CODECS = ("float32", "float16", "uint8", "top2")
# The paper's CIFAR-10 setting: U = 20 % of 50,000 training images, M = 10, these client models.
PAPER_PUBLIC, PAPER_CLASSES = 10_000, 10
PAPER_MODELS = ("alexnet", "resnet18", "mobilenetv2", "squeezenet")


def fedavg_bytes(parameters: int) -> int:
    """FedAvg per client per round: the float32 model down and its update up."""
    return 2 * 4 * int(parameters)


def codec_bytes(codec: str, n: int, m: int) -> int:
    """Encoded bytes of one (n, M) probability matrix (the size depends only on the shape)."""
    probs = np.random.default_rng(0).dirichlet(np.ones(m), n).astype(np.float32)
    return int(sum(a.nbytes for a in encode_probs(probs, codec).values()))


def paper_scale(codecs: tuple[str, ...] = CODECS) -> dict[str, Any]:
    """COSMOS up + down bytes at the paper's scale (computed by encoding arrays of that shape)
    against FedAvg for each of the paper's client models (parameters from the model zoo)."""
    params = {
        name: sum(
            p.numel()
            for p in build_model(
                name, in_channels=3, num_classes=PAPER_CLASSES, image_size=32, seed=0
            ).parameters()
        )
        for name in PAPER_MODELS
    }
    per_codec = {c: 2 * codec_bytes(c, PAPER_PUBLIC, PAPER_CLASSES) for c in codecs}
    return {"parameters": params, "cosmos_bytes": per_codec}


def run(
    *,
    data_dir: str | None = None,
    config: str | None = None,
    rounds: int = 2,
    codecs: tuple[str, ...] = CODECS,
    seed: int = 1,
    quick: bool = False,
) -> Report:
    from cosmosfl.experiment.runner import run_experiment

    rounds = 1 if quick else rounds
    report = Report(
        "communication",
        "Communication per client per round: payload codecs vs FedAvg",
        [
            "codec",
            "up+down B/client/round",
            "x fewer than FedAvg (CPU models, min..max)",
            "x fewer, paper scale (min..max)",
            "cluster-model acc",
            "Δ vs float32 (points)",
            "client-model acc",
        ],
    )
    scale = paper_scale(codecs)
    runs: dict[str, Any] = {}
    for codec in codecs:
        overrides = [f"algorithm.codec={codec}", f"rounds={rounds}", f"seed={seed}"]
        if quick:
            overrides += ["data.max_train=1500", "algorithm.pretrain_epochs=1"]
        cfg = cifar_config(data_dir, config, overrides)
        result = run_experiment(cfg, None, progress=False)
        s = result.summary  # type: ignore[attr-defined]
        b = s["bytes_per_client_per_round"]
        total = b["up"] + b["down"]
        ratios = [fedavg_bytes(p) / total for p in s["client_parameters"].values() if p]
        runs[codec] = {
            "bytes_up": b["up"],
            "bytes_down": b["down"],
            "fedavg_ratio_min": min(ratios),
            "fedavg_ratio_max": max(ratios),
            "accuracy": s["final_round"]["mean_accuracy"],
            "seconds_per_round": s["seconds_per_round"],
        }
    base = runs[codecs[0]]["accuracy"]["cluster_model"]
    for codec in codecs:
        r = runs[codec]
        paper = [
            fedavg_bytes(p) / scale["cosmos_bytes"][codec] for p in scale["parameters"].values()
        ]
        r["paper_ratio_min"], r["paper_ratio_max"] = min(paper), max(paper)
        report.rows.append(
            [
                codec,
                r["bytes_up"] + r["bytes_down"],
                f"{r['fedavg_ratio_min']:.1f}..{r['fedavg_ratio_max']:.1f}",
                f"{min(paper):,.0f}..{max(paper):,.0f}",
                r["accuracy"]["cluster_model"],
                100 * (r["accuracy"]["cluster_model"] - base),
                r["accuracy"]["client_model"],
            ]
        )
    report.data = {"runs": runs, "paper_scale": scale, "rounds": rounds, "seed": seed}
    report.notes += [
        "Bytes are measured: the engine counts the encoded arrays of every message "
        "(soft labels up, cluster-model targets down).",
        "FedAvg-equivalent: 2 x 4 bytes x the client model's parameters (model down + update "
        "up, float32). CPU models: cnn/resnet8/squeezenet at width 0.5 (20-184 k parameters). "
        f"Paper scale: |U| = {PAPER_PUBLIC:,}, M = {PAPER_CLASSES}, client models "
        f"{', '.join(PAPER_MODELS)} at full width ({min(scale['parameters'].values()):,}-"
        f"{max(scale['parameters'].values()):,} parameters).",
        f"Accuracy: mean over clients, final round, {rounds} rounds, one seed ({seed}) per codec "
        "(CPU budget): differences under ~1-2 points are within seed noise.",
    ]
    return report
