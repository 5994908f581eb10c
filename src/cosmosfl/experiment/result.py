"""What a finished run returns, whichever way it ran: `simulate`, `run_experiment` (in-process
or on Flower) or a reference run such as centralized training."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(init=False)
class SimulationResult:
    """Per-round records of a finished run, plus convenient views of them.

    `reported_model` is the evaluation point whose last-round accuracy is the run's result
    (the algorithm's `reported_model`; each record names it under "primary_model").
    """

    algorithm: str
    reported_model: str
    records: list[dict[str, Any]] = field(default_factory=list)

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
                "SimulationResult(primary_model=...) is deprecated; use reported_model=",
                DeprecationWarning,
                stacklevel=2,
            )
            reported_model = reported_model or primary_model
        if reported_model is None:
            raise TypeError("SimulationResult needs the reported_model")
        self.algorithm = algorithm
        self.reported_model = reported_model
        self.records = [] if records is None else records

    @property
    def primary_model(self) -> str:
        """Deprecated name of `reported_model`."""
        warnings.warn(
            "SimulationResult.primary_model is deprecated; use reported_model",
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

    def accuracy(self, model: str | None = None, round_num: int = -1) -> dict[int, float]:
        """Per-client Top-1 of `model` (default: the algorithm's reported model) in a round."""
        rec = self.records[round_num]
        return {int(c): a for c, a in rec["accuracy"][model or self.reported_model].items()}

    def mean_accuracy(self, model: str | None = None, round_num: int = -1) -> float:
        values = list(self.accuracy(model, round_num).values())
        return float(np.mean(values)) if values else math.nan
