"""privacy.md in a comparison's report: what each site spent of its budget (summary.json's
`privacy`), per algorithm and seed."""

from __future__ import annotations

from cosmosfl.reporting.runset import RunSet, display_name

PRIVACY_MD = "privacy.md"


def privacy_markdown(runset: RunSet) -> str | None:
    """One row per run under differential privacy: sites, the budget, the largest and smallest
    ε spent over its sites, fits refused; None when no run was private."""
    rows = []
    for algorithm, runs in runset.runs.items():
        for run in runs:
            sites = run.summary.get("privacy")
            if not sites:
                continue
            spent = [s["epsilon"] for s in sites.values()]
            budgets = {s.get("budget") for s in sites.values()}
            budget = ", ".join("none" if b is None else f"{b:g}" for b in sorted(budgets, key=str))
            refused = sum(int(s["refused_fits"]) for s in sites.values())
            delta = next(iter(sites.values()))["delta"]
            rows.append(
                f"| {display_name(algorithm)} | {run.seed} | {len(sites)} | {budget} | {delta:g} "
                f"| {max(spent):.3g} | {min(spent):.3g} | {refused} |"
            )
    if not rows:
        return None
    head = [
        "ε spent per site over the whole run (RDP or PLD accountant, dp-accounting; "
        "docs/privacy.md): the largest and smallest over the run's sites.",
        "",
        "| algorithm | seed | sites | budget ε | δ | largest ε spent | smallest ε spent "
        "| fits refused |",
        "|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n"
