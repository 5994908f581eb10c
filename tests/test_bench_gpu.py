"""benchmarks/gpu.sh, the prepared GPU run: end to end at toy size on the CPU (its JSON's
layout, every figure finite), its refusal without CUDA. The round's budget cut:
tests/bench/test_rounds.py; `cosmosfl bench gpu` without CUDA: tests/bench/test_gpu.py."""

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cosmosfl.bench.gpu import TOY
from cosmosfl.models.registry import build_model

ROOT = Path(__file__).resolve().parents[1]
PAPER_MODELS = {"vgg16", "mobilenetv2", "squeezenet", "resnet18", "alexnet"}
PHASES = {
    "local_training",
    "prediction",
    "clustering",
    "server_distillation",
    "client_distillation",
    "evaluation",
}


def gpu_sh(*args, env=None):
    environ = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu.sh"), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=600,
    )


def numbers(obj):
    """Every int and float in a JSON value (booleans excluded)."""
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [obj]
    if isinstance(obj, dict):
        return [n for v in obj.values() for n in numbers(v)]
    if isinstance(obj, list):
        return [n for v in obj for n in numbers(v)]
    return []


def test_gpu_sh_toy_runs_end_to_end_and_writes_its_json(tmp_path):
    proc = gpu_sh("--toy", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "gpu-toy.json").read_text())
    data = report["data"]
    cuda = torch.cuda.is_available()
    assert data["toy"] is True
    assert data["device"]["type"] == ("cuda" if cuda else "cpu")
    assert data["device"]["torch"] == torch.__version__
    assert all(math.isfinite(n) and n >= 0 for n in numbers(data))

    # Every paper model, 2 precisions x 2 layouts per batch size; bf16 only timed on CUDA.
    assert set(data["models"]) == PAPER_MODELS
    for name, entry in data["models"].items():
        model = build_model(name, in_channels=3, num_classes=10, image_size=32, width=TOY.width)
        assert entry["parameters"] == sum(p.numel() for p in model.parameters())
        seen = {(v["precision"], v["channels_last"], v["batch_size"]) for v in entry["variants"]}
        assert seen == {
            (p, c, b) for p in ("fp32", "bf16") for c in (False, True) for b in TOY.batch_sizes
        }
        for v in entry["variants"]:
            if v["precision"] == "bf16" and not cuda:
                assert "no CUDA" in v["skipped"] and "images_per_s" not in v
                continue
            assert v["images_per_s"] > 0
            # images/s is the images of one call over its median seconds
            images = v["batch_size"] * v["steps"]
            assert v["images_per_s"] == pytest.approx(images / statistics.median(v["seconds"]))

    [stacked] = data["stacked"]
    assert (stacked["model"], stacked["k"]) == TOY.stacked[0]
    assert stacked["loop_images_per_s"] > 0 and stacked["stacked_images_per_s"] > 0
    assert stacked["speedup"] == pytest.approx(
        stacked["stacked_images_per_s"] / stacked["loop_images_per_s"]
    )

    paper = data["paper_round"]
    assert paper["config"] == "configs/paper-cifar10.yaml" and paper["completed"] is True
    assert "rounds=1" in paper["overrides"] and "data.num_clients=5" in paper["overrides"]
    assert paper["clients"] == 5 and paper["data"].startswith("synthetic")
    assert set(paper["client_models"]) == {"mobilenetv2", "squeezenet"}
    seconds = paper["seconds"]
    assert set(seconds) == PHASES | {"total"}
    assert seconds["total"] > 0
    # The phases lie inside the round: together they take no longer than it
    assert sum(v for k, v in seconds.items() if k != "total") <= seconds["total"] + 1e-3
    # 5 clients x (train, predict, evaluate, distill, evaluate) = 25 client tasks; the
    # cluster models' evaluation runs on the server's side
    assert paper["client_tasks"] == 25
    assert data["round_minutes"] == pytest.approx(seconds["total"] / 60)
    assert data["paper_reference"]["minutes_per_round"] == {"low": 5.0, "high": 20.0}
    assert set(data["phase_wall_s"]) == {"models", "stacked", "paper_round"}


def test_gpu_sh_without_cuda_refuses_with_a_clear_message(tmp_path):
    proc = gpu_sh("--out", str(tmp_path), env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 3
    assert "no CUDA device" in proc.stderr and "--toy" in proc.stderr
    assert not list(tmp_path.iterdir())


def test_gpu_sh_rejects_unknown_options():
    proc = gpu_sh("--fast")
    assert proc.returncode == 2 and "unknown option --fast" in proc.stderr
