"""Seconds per COSMOS round by phase: the CIFAR-10 CPU config with the fast path off and on,
and one round of the paper config cut at a deadline (the GPU run)."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.bench.accuracy import _OverBudget, _time_box
from cosmosfl.bench.common import Report
from cosmosfl.bench.configs import cifar_config, find_data_dir
from cosmosfl.experiment.errors import ConfigError

PHASES = (
    "local_training",
    "prediction",
    "clustering",
    "server_distillation",
    "client_distillation",
    "evaluation",
)
# The fast-path switches that did not slow this CPU down (benchmarks/README.md, fastpath):
# large inference batches. bf16 autocast and channels-last were slower here; on a GPU add
# clients.precision=bf16 and clients.channels_last=true.
FAST = ["clients.eval_batch_size=512"]


PAPER_CONFIG = "configs/paper-cifar10.yaml"
# The paper's own timing (paper section "Implementation details"): two RTX 4090s, PyTorch
# 2.5.0+cu121, models upsampled to 224 px by the official code (ours run at native 32 px).
PAPER_REFERENCE: dict[str, Any] = {
    "hardware": "2x NVIDIA GeForce RTX 4090",
    "software": "Python 3.10, PyTorch 2.5.0+cu121",
    "minutes_per_round": {"low": 5.0, "high": 20.0},
    "what": "about 5 min per round with AlexNet models, about 20 min with VGG16 server models "
    "and 5 clusters; 25 clients; inputs upsampled to 224 px in the official code",
}


def synthetic_cifar(path: Path, n_train: int, n_test: int) -> Path:
    """Random uint8 images of CIFAR-10's shape with balanced labels: timings only."""
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", n_train), ("test", n_test)):
        arrays[f"x_{split}"] = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
        arrays[f"y_{split}"] = np.arange(n, dtype=np.int64) % 10
    np.savez(path, **arrays)
    return path


@contextlib.contextmanager
def _boxed_phases(engine: Any, deadline: float, state: dict[str, Any]) -> Iterator[None]:
    """Refuse to start a round phase past `deadline`, and note which phase is running."""
    original = engine.phase

    @contextlib.contextmanager
    def phase(name: str) -> Iterator[None]:
        if time.perf_counter() > deadline:
            state["refused"] = name
            raise _OverBudget
        state["phase"] = name
        with original(name):
            yield

    engine.phase = phase
    try:
        yield
    finally:
        engine.phase = original


def project_round(
    seconds: dict[str, float], tasks: list[dict[str, Any]], clients: int, cut: str | None
) -> float | None:
    """A cut round's seconds, projected: the phases that ended as measured, the phase that was
    cut scaled by clients / client tasks it finished. None when that phase finished no client
    task (nothing to scale; phases never reached are not in it either)."""
    if cut is None:
        return None
    done = sum(1 for t in tasks if t["phase"] == cut)
    if done == 0:
        return None
    ended = sum(v for k, v in seconds.items() if k not in (cut, "total"))
    # evaluation runs up to three times a round: only its cut pass is partial
    return ended + seconds.get(cut, 0.0) * max(clients / done, 1.0)


def cifar_dir(data_dir: str | None) -> str | None:
    """The folder holding CIFAR-10 (see find_data_dir), or None where there is none."""
    try:
        return find_data_dir(data_dir)
    except ConfigError:
        return None


def paper_round(
    deadline: float,
    *,
    device: str,
    overrides: Sequence[str] = (),
    synthetic: tuple[int, int] = (50_000, 10_000),
    data_dir: str | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    """Round 1 of the paper config (pre-training, prediction, clustering, server and client
    distillation, evaluation) until `deadline` (perf_counter): no phase and no client task
    starts after it. `config` defaults to configs/paper-cifar10.yaml, else the shipped preset.
    CIFAR-10 from `data_dir`; None = random images of CIFAR-10's shape (`synthetic` train /
    test counts), for timings only."""
    import torch

    from cosmosfl.engines.simulation import InProcessEngine
    from cosmosfl.experiment.build import build_experiment
    from cosmosfl.experiment.config import load_config

    path = config or PAPER_CONFIG
    if config is None and not Path(path).is_file():  # outside a checkout: the shipped copy
        from cosmosfl.presets import preset_path

        path = str(preset_path("paper-cifar10"))
    if not Path(path).is_file():
        raise ConfigError(f"config {path!r} not found")
    overrides = ["rounds=1", f"device={device}", *overrides]
    with tempfile.TemporaryDirectory() as tmp:
        if data_dir is not None:
            overrides.append(f"data.data_dir={data_dir}")
            source = "cifar10"
        else:
            npz = synthetic_cifar(Path(tmp) / "synthetic_cifar10.npz", *synthetic)
            overrides.append(f"data.dataset={npz}")
            source = f"synthetic: {synthetic[0]} random training images (accuracy meaningless)"
        cfg = load_config(path, overrides)
        start = time.perf_counter()
        torch.manual_seed(cfg.seed)
        exp = build_experiment(cfg)
        setup = time.perf_counter() - start
        tasks: list[dict[str, Any]] = []
        engine = InProcessEngine(exp.clients, exp.public_x, seed=cfg.seed, device=cfg.device)
        state: dict[str, Any] = {"phase": None, "refused": None}
        _time_box(exp.clients, exp.client_models, deadline, tasks)
        _tag_phases(exp.clients, tasks, state)
        record, cut = None, None
        round_start = time.perf_counter()
        try:
            with _boxed_phases(engine, deadline, state):
                record = engine.run_round(exp.algorithm, 1, 1)
        except _OverBudget:
            cut = state["refused"] or state["phase"]
        finally:
            engine.close()
        if record is not None:
            measured = dict(record["seconds"])
        else:  # the phases so far, as the engine summed them, and the cut round's wall time
            measured = {**engine._seconds, "total": time.perf_counter() - round_start}
    result: dict[str, Any] = {
        "config": path,
        "overrides": [o for o in overrides if not o.startswith("data.dataset=")],
        "data": source,
        "clients": len(exp.clients),
        "client_models": sorted(set(exp.client_models)),
        "public_size": len(exp.public_x),
        "round": 1,
        "setup_s": setup,
        "completed": record is not None,
        "seconds": measured,
        "client_tasks": len(tasks),
    }
    if record is not None:
        result["mean_accuracy"] = record["mean_accuracy"]
    else:
        result["cut_in_phase"] = cut
        result["projected_total_s"] = project_round(measured, tasks, len(exp.clients), cut)
        result["phases_not_reached"] = [p for p in PHASES if p not in measured]
    return result


def _tag_phases(clients: list[Any], tasks: list[dict[str, Any]], state: dict[str, Any]) -> None:
    """Tag each client task that `_time_box` logs with the round phase it ran in."""
    for client in clients:
        inner = client.handle

        def handle(message: Any, _inner: Any = inner) -> Any:
            reply = _inner(message)
            tasks[-1]["phase"] = state["phase"]
            return reply

        client.handle = handle


def round_time(
    *,
    data_dir: str | None = None,
    config: str | None = None,
    rounds: int = 2,
    quick: bool = False,
) -> Report:
    from cosmosfl.experiment.runner import run_experiment

    rounds = 1 if quick else rounds
    variants = {"reference (fp32)": [], "fast path": FAST}
    extra = [f"rounds={rounds}"]
    if quick:
        extra += ["data.max_train=1500", "algorithm.pretrain_epochs=1"]
    records: dict[str, list[dict[str, Any]]] = {}
    accuracy: dict[str, dict[str, float]] = {}
    for name, overrides in variants.items():
        result = run_experiment(cifar_config(data_dir, config, extra + overrides), progress=False)
        records[name] = [r["seconds"] for r in result.records]
        accuracy[name] = result.summary["final_round"]["mean_accuracy"]  # type: ignore[attr-defined]
    names = list(variants)
    columns = ["phase"] + [f"round {t} {n}" for t in range(1, rounds + 1) for n in names]
    report = Report(
        "round-time", "Seconds per COSMOS round by phase (CIFAR-10 CPU config)", columns
    )
    for phase in (*PHASES, "total"):
        report.rows.append(
            [phase] + [records[n][t].get(phase, 0.0) for t in range(rounds) for n in names]
        )
    share = []
    for t in range(rounds):
        for n in names:
            sec = records[n][t]
            share.append(100 * (sec.get("prediction", 0) + sec.get("evaluation", 0)) / sec["total"])
    report.rows.append(["prediction + evaluation, % of round", *share])
    report.rows.append(
        ["final cluster-model accuracy"]
        + [
            accuracy[n]["cluster_model"] if t == rounds - 1 else ""
            for t in range(rounds)
            for n in names
        ]
    )
    report.data = {"seconds": records, "accuracy": accuracy, "fast_overrides": FAST}
    report.notes += [
        "Seconds are machine-specific and were measured on a shared 2-core machine "
        "(threads=1, other jobs running): compare columns, not runs on other days.",
        "Round 1 is pre-training (E0 = 5 epochs) + clustering; round 2 a fine-tuning round.",
        f"fast path = {' '.join(FAST)} (client models); bf16 and channels-last are left out "
        "because the fastpath benchmark measured them slower on this CPU.",
    ]
    return report


def parallel(
    *,
    data_dir: str | None = None,
    config: str | None = None,
    workers: int = 2,
    quick: bool = False,
) -> Report:
    """Serial vs `workers` client processes on one COSMOS round (threads=1 in both)."""
    from cosmosfl.experiment.runner import run_experiment

    extra = ["rounds=1", "algorithm.pretrain_epochs=2"]
    if quick:
        extra += ["data.max_train=1500", "algorithm.pretrain_epochs=1"]
    seconds, records = {}, {}
    for w in (1, workers):
        cfg = cifar_config(data_dir, config, [*extra, f"workers={w}"])
        result = run_experiment(cfg, progress=False)
        seconds[w] = result.records[0]["seconds"]
        records[w] = [{k: v for k, v in r.items() if k != "seconds"} for r in result.records]
    identical = records[1] == records[workers]
    report = Report(
        "parallel",
        f"Parallel clients: serial vs {workers} worker processes (one COSMOS round)",
        ["phase", "serial s", f"{workers} workers s", "speed-up"],
    )
    for phase in (*PHASES, "total"):
        a, b = seconds[1].get(phase, 0.0), seconds[workers].get(phase, 0.0)
        report.rows.append([phase, a, b, a / b if b > 0 else float("nan")])
    report.data = {"seconds": seconds, "identical_records": identical, "workers": workers}
    report.notes += [
        f"Records (accuracies, clusters, bytes) identical to the serial run: {identical}.",
        "Client phases (local training, prediction, client distillation, evaluation) run in "
        "the workers; clustering and server distillation stay in the main process.",
        "Seconds are machine-specific; on a shared 2-core machine the speed-up is bounded by "
        "the cores other jobs leave free. Worker start-up (spawn + import torch, once per run, "
        "before round 1) is not in these per-round figures.",
    ]
    return report
