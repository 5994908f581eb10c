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
# The client-side fast path: bf16 autocast, NHWC layout, large inference batches.
FAST = ["clients.precision=bf16", "clients.channels_last=true", "clients.eval_batch_size=512"]


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
        f"fast path = {' '.join(FAST)} (client models; server models stay fp32).",
    ]
    return report
