"""The numbers of a report: final-round mean ± SEM over seeds per evaluated model, per-round
curves, the † rule, and the bytes each client moved per round. The result is always the last
round; the best round is kept beside it, labelled as not the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosmosfl.reporting.runset import PROPOSED, Run, RunSet, role

# Evaluated models: (plain text, LaTeX / matplotlib mathtext).
MODEL_LABELS = {
    "cluster_model": ("cluster model h_π(i)", r"cluster model $h_{\pi(i)}$"),
    # COSMOS's validated recipe: what each client deploys (its own model after the gate).
    "deployed": ("deployed model (validated)", r"deployed model (validated)"),
    "client_model": ("client model f_i", r"client model $f_i$"),
    "local": ("client model after local training f_i^(t,1)", r"local model $f_i^{(t,1)}$"),
    # Parameter-sharing baselines: the shared model, or each client's personalised model.
    "global_model": ("global model w", r"global model $w$"),
    "personal_model": ("personal model", r"personal model"),
}
COSMOS_LOCAL_LABEL = (
    "client model after local training f_i^(t,1)",
    r"client model after local training $f_i^{(t,1)}$",
)
COSMOS_CLIENT_LABEL = ("distilled client model f_i^(t,2)", r"distilled client model $f_i^{(t,2)}$")
COSMOS_SELECTED_LABEL = (
    "h_π(i) or f_i^(t,1), chosen on validation",
    r"$h_{\pi(i)}$ or $f_i^{(t,1)}$, chosen on validation",
)
MB = 1e6  # bytes


def model_label(model: str, tex: bool = False) -> str:
    text, latex = MODEL_LABELS.get(model, (model, model.replace("_", r"\_")))
    return latex if tex else text


def mean_sem(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (sample std with ddof=1 over √n; 0 for a single value)."""
    n = len(values)
    mean = float(np.mean(values))
    return mean, float(np.std(values, ddof=1) / math.sqrt(n)) if n > 1 else 0.0


@dataclass(frozen=True)
class Paired:
    """A paired difference over the seeds two series share: mean ± SEM, and on how many seeds
    the first is above the second."""

    mean: float
    sem: float
    above: int
    n: int

    def text(self) -> str:
        mean = f"{100 * self.mean:+.2f}".replace("-0.00", "+0.00")  # no signed zero
        return f"{mean} ± {100 * self.sem:.2f} ({self.above} of {self.n} above)"


def paired_difference(
    seeds: list[int], final: list[float], other_seeds: list[int], other_final: list[float]
) -> Paired | None:
    """Per seed both have, `final` minus `other_final`; None without a common seed."""
    common = [s for s in seeds if s in other_seeds]
    if not common:
        return None
    diffs = [final[seeds.index(s)] - other_final[other_seeds.index(s)] for s in common]
    mean, sem = mean_sem(diffs)
    return Paired(mean, sem, sum(d > 0 for d in diffs), len(diffs))


def curve(runs: list[Run], model: str, metric: str = "mean_accuracy") -> np.ndarray:
    """(seeds, rounds) mean-over-clients values per round, cut to the rounds all seeds have."""
    series = [[r[metric][model] for r in run.records if model in r.get(metric, {})] for run in runs]
    length = min(len(s) for s in series)
    return np.array([s[:length] for s in series], dtype=np.float64)


@dataclass
class Row:
    """One line of the accuracy table: an algorithm's evaluated model over seeds."""

    algorithm: str
    model: str
    label: tuple[str, str]  # plain text, LaTeX
    seeds: list[int]
    final: list[float]  # per seed: last round, mean over clients
    mean: float
    sem: float
    best_round: int  # of the seed-mean curve (context only, not the result)
    best_value: float
    top5: tuple[float, float] | None = None
    dagger: bool = False

    @property
    def role(self) -> str:
        return role(self.algorithm)


def _row(algorithm: str, runs: list[Run], model: str, label: tuple[str, str]) -> Row:
    final = [float(run.records[-1]["mean_accuracy"][model]) for run in runs]
    mean, sem = mean_sem(final)
    per_round = curve(runs, model).mean(axis=0)
    best = int(np.argmax(per_round))
    top5 = None
    if all(model in run.records[-1].get("mean_top5", {}) for run in runs):
        top5 = mean_sem([float(run.records[-1]["mean_top5"][model]) for run in runs])
    seeds = [run.seed for run in runs]
    return Row(
        algorithm, model, label, seeds, final, mean, sem, best + 1, float(per_round[best]), top5
    )


def accuracy_rows(runset: RunSet) -> list[Row]:
    """The table's rows; COSMOS also gets rows for its client model after local training
    f_i^(t,1), its distilled client model f_i^(t,2) and, with select_on_validation, the model
    each client chose on its validation slice."""
    rows = []
    for algorithm, runs in runset.runs.items():
        model = str(runs[0].summary.get("reported_model", runs[0].records[-1]["primary_model"]))
        rows.append(_row(algorithm, runs, model, (model_label(model), model_label(model, True))))
        # COSMOS's other evaluation points, in protocol order: f_i^(t,1) (after local
        # fine-tuning, where the collaboration may show in the client's own model) and f_i^(t,2).
        points = (
            ("cluster_model", MODEL_LABELS["cluster_model"]),  # when "deployed" is reported
            ("local", COSMOS_LOCAL_LABEL),
            ("client_model", COSMOS_CLIENT_LABEL),
            ("selected", COSMOS_SELECTED_LABEL),  # with select_on_validation only
        )
        for point, label in points:
            present = all(point in r.records[-1]["mean_accuracy"] for r in runs)
            if algorithm == PROPOSED and model != point and present:
                rows.append(_row(algorithm, runs, point, label))
    mark_dagger(rows)
    return rows


def intervals_overlap(a: Row, b: Row) -> bool:
    return a.mean - a.sem <= b.mean + b.sem and b.mean - b.sem <= a.mean + a.sem


DAGGER_RULE = (
    "† on COSMOS's reported model: its interval [mean − SEM, mean + SEM] over seeds overlaps "
    "the interval of no federated baseline (every algorithm except COSMOS and the references "
    "local and centralized); assigned only with at least 2 seeds for every run compared and at "
    "least one baseline. Separation does not say which is higher: compare the means."
)


def mark_dagger(rows: list[Row]) -> None:
    """Set `dagger` on COSMOS's reported row when it is separated from every baseline."""
    proposed = next((r for r in rows if r.role == "proposed"), None)
    baselines = [r for r in rows if r.role == "baseline"]
    if proposed is None or not baselines or min(len(r.seeds) for r in [proposed, *baselines]) < 2:
        return
    proposed.dagger = not any(intervals_overlap(proposed, b) for b in baselines)


def dagger_direction(rows: list[Row]) -> str | None:
    """Which side of the baselines a †-marked COSMOS lies on (the rule alone does not say)."""
    proposed = next((r for r in rows if r.dagger), None)
    if proposed is None:
        return None
    means = [r.mean for r in rows if r.role == "baseline"]
    side = "above" if proposed.mean > max(means) else "below"
    side = side if proposed.mean > max(means) or proposed.mean < min(means) else "between"
    return f"Here COSMOS's † interval lies {side} the baselines' intervals."


@dataclass
class CommRow:
    """Measured payload per client per round (MB), and what FedAvg would move instead."""

    algorithm: str
    up_mb: float
    down_mb: float
    fedavg_mb: float | None  # parameters × 4 bytes, each way; None when no client is torch
    torch_clients: int
    clients: int


def communication_rows(runset: RunSet) -> list[CommRow]:
    """Mean over clients, rounds and seeds of the bytes each client sent and received."""

    def per_client(runs: list[Run], key: str) -> float:
        per_run = [np.mean([np.mean(list(r[key].values())) for r in run.records]) for run in runs]
        return float(np.mean(per_run))

    # The client models are the same for every algorithm of a comparison: a run whose summary
    # predates `client_parameters` borrows the counts of another run.
    recorded = [
        r.summary["client_parameters"]
        for runs in runset.runs.values()
        for r in runs
        if "client_parameters" in r.summary
    ]
    rows = []
    for algorithm, runs in runset.runs.items():
        own = [r.summary["client_parameters"] for r in runs if "client_parameters" in r.summary]
        params = (own or recorded or [{}])[0]
        counts = [p for p in params.values() if p is not None]
        fedavg = float(np.mean(counts)) * 4 / MB if counts else None
        up, down = per_client(runs, "bytes_up") / MB, per_client(runs, "bytes_down") / MB
        rows.append(CommRow(algorithm, up, down, fedavg, len(counts), len(params)))
    return rows
