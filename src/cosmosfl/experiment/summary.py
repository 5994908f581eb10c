"""The summary of a finished run: final-round numbers first, best round beside them, labelled."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.experiment.result import RunResult


def _sem(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def summarize(
    result: RunResult,
    meta: dict[str, Any] | None = None,
    *,
    wall_seconds: float | None = None,
) -> dict[str, Any]:
    """Summarise a run. The reported result is the last round; the best round is only context."""
    if not result.records:
        raise ValueError("the run has no finished round to summarise")
    last = result.records[-1]
    best: dict[str, Any] = {}
    for model in last["mean_accuracy"]:
        rounds = [
            (r["round"], r["mean_accuracy"][model])
            for r in result.records
            if model in r.get("mean_accuracy", {})
        ]
        r, a = max(rounds, key=lambda t: t[1])
        best[model] = {"round": r, "mean_accuracy": a}
    up = [np.mean(list(r["bytes_up"].values())) for r in result.records]
    down = [np.mean(list(r["bytes_down"].values())) for r in result.records]
    summary: dict[str, Any] = {
        "algorithm": result.algorithm,
        "reported_model": result.reported_model,
        "rounds": len(result.records),
        **(meta or {}),
        "final_round": {
            "mean_accuracy": last["mean_accuracy"],
            "sem_over_clients": {m: _sem(list(v.values())) for m, v in last["accuracy"].items()},
            "accuracy": last["accuracy"],
        },
        "best_round_not_the_result": best,
        "bytes_per_client_per_round": {"up": float(np.mean(up)), "down": float(np.mean(down))},
        "seconds_per_round": float(np.mean([r["seconds"]["total"] for r in result.records])),
    }
    if "mean_top5" in last:
        summary["final_round"]["mean_top5"] = last["mean_top5"]
        summary["final_round"]["sem_over_clients_top5"] = {
            m: _sem(list(v.values())) for m, v in last["top5"].items()
        }
    summary["rejected_replies"] = sum(len(r.get("rejected", [])) for r in result.records)
    excluded = excluded_in_final_round(result.records)
    if excluded:
        summary["excluded_in_final_round"] = {str(c): why for c, why in excluded.items()}
    if any("faults" in r for r in result.records):  # a run with injected faults
        counts: dict[str, int] = {}
        for r in result.records:
            for f in r.get("faults", []):
                counts[f["fault"]] = counts.get(f["fault"], 0) + 1
        summary["injected_faults"] = dict(sorted(counts.items()))  # (client, task) events
        summary["byzantine"] = last.get("byzantine", [])
    privacy = privacy_spent(result.records)
    if privacy:
        summary["privacy"] = privacy
    if wall_seconds is not None:
        summary["wall_seconds"] = round(wall_seconds, 2)
    if result.clusters is not None:
        summary["clusters"] = {str(c): k for c, k in result.clusters.items()}
        summary["K"] = last.get("K")
        summary["threshold"] = last.get("threshold")
    return summary


def privacy_spent(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per site under differential privacy: ε spent over the run (its last ledger), δ, the
    budget, fits accepted, fits refused, and the ε spent in each round (0 without a fit)."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        for cid, ledger in r.get("privacy", {}).items():
            site = out.setdefault(cid, {"refused_fits": 0, "epsilon_per_round": {}})
            site.update({k: ledger[k] for k in ("epsilon", "delta", "fits") if k in ledger})
            if "budget" in ledger:
                site["budget"] = ledger["budget"]
            site["refused_fits"] += int(ledger.get("refused", 0))
            site["epsilon_per_round"][str(r["round"])] = ledger.get("epsilon_fit", 0.0)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def excluded_in_final_round(records: list[dict[str, Any]]) -> dict[int, str]:
    """Clients whose replies the server rejected in the last round, with the first reason: a
    client whose model went non-finite stays excluded, and its accuracy is still in the mean."""
    out: dict[int, str] = {}
    for item in records[-1].get("rejected", []) if records else []:
        out.setdefault(int(item["client"]), f"{item['task']}: {item['reason']}")
    return dict(sorted(out.items()))


def exclusion_warning(summary: dict[str, Any]) -> str | None:
    """One line for the console when some clients were excluded at the end of a run."""
    excluded = summary.get("excluded_in_final_round")
    if not excluded:
        return None
    first = next(iter(excluded.values()))
    return (
        f"warning: {len(excluded)} client(s) excluded in the final round "
        f"(clients {', '.join(excluded)}; first reason: {first}); "
        "see `rejected` in metrics.jsonl"
    )


def write_run_directory(
    result: RunResult, path: str | Path, meta: dict[str, Any] | None = None
) -> Path:
    """Write metrics.jsonl, metrics.csv and summary.json for a run made from Python (e.g. with
    `simulate`)."""
    import json

    from cosmosfl.experiment.rundir import (
        METRICS,
        METRICS_CSV,
        SUMMARY,
        metrics_csv,
        write_atomic,
    )

    out = Path(path)
    lines = "".join(json.dumps(r) + "\n" for r in result.records)
    write_atomic(out / METRICS, lines)
    write_atomic(out / METRICS_CSV, metrics_csv(result.records))
    write_atomic(out / SUMMARY, json.dumps(summarize(result, meta), indent=2) + "\n")
    return out
