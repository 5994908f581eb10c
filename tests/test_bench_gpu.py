"""benchmarks/gpu.sh, the prepared GPU run: end to end at toy size on the CPU (its JSON's
layout, every figure finite), its refusal without CUDA, and the round's budget cut."""

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cosmosfl.bench import rounds
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


def test_bench_gpu_needs_cuda_unless_quick(monkeypatch, capsys):
    from cosmosfl.cli.main import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["bench", "gpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a CUDA device" in err[0] and "--quick" in err[0]


def toy_round(deadline):
    return rounds.paper_round(
        deadline,
        device="cpu",
        overrides=TOY.round_overrides,
        synthetic=TOY.synthetic,
        config=str(ROOT / rounds.PAPER_CONFIG),
    )


def test_paper_round_past_its_deadline_starts_no_phase():
    result = toy_round(time.perf_counter() - 1)
    assert result["completed"] is False and result["cut_in_phase"] == "local_training"
    assert result["client_tasks"] == 0 and result["projected_total_s"] is None
    assert set(result["phases_not_reached"]) == PHASES
    assert "mean_accuracy" not in result


def test_paper_round_client_tasks_refuse_work_past_the_deadline(monkeypatch):
    # Phases unboxed: the client-side box alone must stop the round, inside its first phase.
    monkeypatch.setattr(rounds, "_boxed_phases", _note_phase_only)
    result = toy_round(time.perf_counter() - 1)
    assert result["completed"] is False and result["cut_in_phase"] == "local_training"
    assert result["client_tasks"] == 0
    assert set(result["seconds"]) == {"local_training", "total"}
    assert set(result["phases_not_reached"]) == PHASES - {"local_training"}


@contextlib.contextmanager
def _note_phase_only(engine, deadline, state):
    original = engine.phase

    @contextlib.contextmanager
    def phase(name):
        state["phase"] = name
        with original(name):
            yield

    engine.phase = phase
    yield


def test_paper_round_outside_a_checkout_uses_the_shipped_preset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here
    result = rounds.paper_round(
        time.perf_counter() - 1, device="cpu", overrides=TOY.round_overrides, synthetic=(300, 100)
    )
    assert result["config"].endswith("presets/paper-cifar10.yaml")
    assert result["clients"] == 5 and result["completed"] is False


def test_project_round_scales_the_cut_phase_by_the_clients_it_finished():
    seconds = {"local_training": 100.0, "prediction": 10.0, "evaluation": 4.0,
               "clustering": 1.0, "server_distillation": 50.0, "client_distillation": 30.0,
               "total": 195.0}  # fmt: skip
    tasks = [{"phase": "client_distillation"}] * 5 + [{"phase": "local_training"}] * 25
    # 165 s of ended phases + 30 s for 5 of 25 clients -> 150 s for all of them
    assert rounds.project_round(seconds, tasks, 25, "client_distillation") == 165.0 + 150.0
    assert rounds.project_round(seconds, tasks, 25, None) is None
    assert rounds.project_round(seconds, tasks, 25, "prediction") is None  # no task finished
