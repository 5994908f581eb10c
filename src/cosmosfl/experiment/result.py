"""What a finished run returns, whichever way it ran: `simulate`, `run_experiment` (in-process
or on Flower) or a reference run such as centralized training."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class NotEvaluatedError(KeyError, ValueError):
    """A view of a result asked for a model (evaluation point) the run did not evaluate; the
    message names the models it has. A KeyError (a missing key in the records) and a
    ValueError (a bad argument), so code that catches either keeps working."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""


@dataclass(init=False)
class RunResult:
    """Per-round records of a finished run, plus convenient views of them.

    `records` are the JSON records of metrics.jsonl (client ids as string keys); every view
    (`accuracy`, `accuracies`, `clusters`, `bytes`) gives client ids as ints.

    `reported_model` is the evaluation point whose last-round accuracy is the run's result
    (the algorithm's `reported_model`; each record names it under "primary_model").
    """

    algorithm: str
    reported_model: str
    records: list[dict[str, Any]] = field(default_factory=list)
    # summary.json's content, for runs that write one (run_experiment); None for `simulate`.
    summary: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        algorithm: str,
        reported_model: str | None = None,
        records: list[dict[str, Any]] | None = None,
        *,
        primary_model: str | None = None,
    ) -> None:
        if primary_model is not None:
            warnings.warn(
                "RunResult(primary_model=...) is deprecated; use reported_model=",
                DeprecationWarning,
                stacklevel=2,
            )
            reported_model = reported_model or primary_model
        if reported_model is None:
            raise TypeError("RunResult needs the reported_model")
        self.algorithm = algorithm
        self.reported_model = reported_model
        self.records = [] if records is None else records
        self.summary = None

    @property
    def primary_model(self) -> str:
        """Deprecated name of `reported_model`."""
        warnings.warn(
            "RunResult.primary_model is deprecated; use reported_model",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.reported_model

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return self.records

    @property
    def clusters(self) -> dict[int, int] | None:
        """Cluster assignment π of the last round (None for algorithms without clusters)."""
        for rec in reversed(self.records):
            if "clusters" in rec:
                return {int(c): int(k) for c, k in rec["clusters"].items()}
        return None

    @property
    def bytes(self) -> dict[str, list[dict[int, int]]]:
        """Measured payload bytes per round per client: {"up": [...], "down": [...]}."""
        return {
            d: [{int(c): int(b) for c, b in rec[f"bytes_{d}"].items()} for rec in self.records]
            for d in ("up", "down")
        }

    def models(self, round_num: int = -1) -> list[str]:
        """The models (evaluation points) with accuracies in a round, e.g. ["client_model",
        "cluster_model"]."""
        return list(self._record(round_num).get("accuracy", {}))

    def accuracy(self, model: str | None = None, round_num: int = -1) -> dict[int, float]:
        """Per-client Top-1 of `model` (default: the algorithm's reported model) in a round;
        NotEvaluatedError, naming the models the round has, if it did not evaluate `model`."""
        name = model or self.reported_model
        rec = self._record(round_num)
        per_model = rec.get("accuracy", {})
        if name not in per_model:
            have = ", ".join(per_model) or "none"
            which = "the last round" if round_num == -1 else f"round index {round_num}"
            raise NotEvaluatedError(
                f"this run has no {name!r} accuracies in {which} (algorithm "
                f"{self.algorithm}); evaluated models: {have}"
            )
        return {int(c): a for c, a in per_model[name].items()}

    def accuracies(self, model: str | None = None) -> list[dict[int, float]]:
        """Per-client Top-1 of `model` in every round, oldest first (int client ids)."""
        return [self.accuracy(model, i) for i in range(len(self.records))]

    def mean_accuracy(self, model: str | None = None, round_num: int = -1) -> float:
        """Mean over clients of `accuracy(model, round_num)` (NaN if no client was evaluated)."""
        values = list(self.accuracy(model, round_num).values())
        return float(np.mean(values)) if values else math.nan

    def _record(self, round_num: int) -> dict[str, Any]:
        if not self.records:
            raise IndexError(f"this {self.algorithm} result has no rounds (records is empty)")
        try:
            return self.records[round_num]
        except IndexError:
            raise IndexError(
                f"round index {round_num} is out of range: this run has "
                f"{len(self.records)} round(s)"
            ) from None


# Its name until 0.3, when only simulations returned it; Flower deployments and the centralized
# reference return it too. Kept so that code written against it keeps working.
SimulationResult = RunResult
