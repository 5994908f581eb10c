"""Seconds per COSMOS round by phase on the CIFAR-10 CPU config, fast path off and on."""

from __future__ import annotations

from typing import Any

from cosmosfl.bench.common import Report
from cosmosfl.bench.configs import cifar_config

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
