"""What COSMOS's validated recipe decided, per run, from its round records: how well each
server model h_k copied its teacher f̄_k on held-out U (`server_fidelity`), and how often
clients kept the distillation step their gate judged (`client_distill`'s `gate_*`)."""

from __future__ import annotations

import numpy as np

from cosmosfl.reporting.runset import RunSet

DECISIONS_MD = "cosmos-decisions.md"


def decision_rows(runset: RunSet) -> list[dict[str, float | int | str]]:
    """One row per run that recorded the validated recipe's decisions: held-out agreement
    and KL of its server models in the first and last round (mean over clusters), and the
    share of gated distillation steps kept over the run."""
    rows = []
    for algorithm, runs in runset.runs.items():
        for run in sorted(runs, key=lambda r: r.seed):
            fid = [r["server_fidelity"] for r in run.records if r.get("server_fidelity")]
            gates = [
                v["gate_kept"]
                for r in run.records
                for v in (r.get("client_distill") or {}).values()
                if "gate_kept" in v and not v.get("gate_open")
            ]
            if not fid and not gates:
                continue
            row: dict[str, float | int | str] = {"algorithm": algorithm, "seed": run.seed}
            for name, rec in (("first", fid[0]), ("last", fid[-1])) if fid else ():
                row[f"agreement_{name}"] = float(
                    np.mean([v["fidelity_agreement"] for v in rec.values()])
                )
                row[f"kl_{name}"] = float(np.mean([v["fidelity_kl"] for v in rec.values()]))
            row["kept"] = float(np.mean(gates)) if gates else float("nan")
            row["steps"] = len(gates)
            rows.append(row)
    return rows


def decisions_markdown(rows: list[dict[str, float | int | str]], title: str) -> str:
    def cell(row: dict, key: str, pct: bool = False) -> str:
        v = row.get(key)
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return "—"
        return f"{100 * float(v):.1f}" if pct else f"{float(v):.3f}"

    lines = [
        f"# COSMOS's decisions (validated recipe) — {title}",
        "",
        "| algorithm | seed | h_k agreement with f̄_k on held-out U, round 1 → last (%) "
        "| KL(f̄_k ‖ h_k), round 1 → last | gated steps kept (%) | gated steps |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['algorithm']} | {r['seed']} "
            f"| {cell(r, 'agreement_first', True)} → {cell(r, 'agreement_last', True)} "
            f"| {cell(r, 'kl_first')} → {cell(r, 'kl_last')} "
            f"| {cell(r, 'kept', True)} | {r['steps']} |"
        )
    lines += [
        "",
        "- Fidelity: mean over clusters of each server model's agreement with (shared argmax) "
        "and KL to its cluster's teacher on the rows of U held out of its training "
        "(`server_fidelity` in metrics.jsonl).",
        "- Gated steps: client distillation steps judged on a validation slice (slices too "
        "small to judge are not counted); a step not kept left the client's model exactly as "
        "it was (`client_distill` → `gate_kept` in metrics.jsonl).",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["DECISIONS_MD", "decision_rows", "decisions_markdown"]
