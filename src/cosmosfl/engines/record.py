"""`RoundLog`: one round as an engine records it, and its one serialiser.

The algorithm reports accuracies and its own info (`RoundRecord`); the engine adds what it
measured: bytes per client and direction, seconds per phase, rejected payloads, and what only
one engine has (injected faults in-process; missing clients, evaluation bytes, client seconds
and round trips over Flower). `to_json` gives the line of metrics.jsonl, for every engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cosmosfl.algorithms.base import RoundRecord


@dataclass
class RoundLog:
    """A round's record: the algorithm's report plus the engine's measurements. Fields that
    are None are not recorded (an engine that does not measure them)."""

    round: int
    algorithm: str
    primary_model: str
    report: RoundRecord
    bytes_up: Mapping[int, int]
    bytes_down: Mapping[int, int]
    seconds: Mapping[str, float]  # per phase
    total_seconds: float
    rejected: list[dict[str, Any]]
    # Flower only: server models sent for measurement (not protocol traffic), seconds each
    # client spent per task, Flower messages sent, clients that did not answer.
    eval_bytes_down: Mapping[int, int] | None = None
    client_seconds: Mapping[str, Mapping[int, float]] | None = None
    round_trips: int | None = None
    missing: list[dict[str, Any]] | None = None
    # In-process fault injection only: the faults of the round, the Byzantine clients.
    faults: list[dict[str, Any]] | None = None
    byzantine: list[int] | None = None
    # Clients under differential privacy: each one's ledger after its fit of the round (ε spent
    # so far, by this fit, δ, budget, fits, whether the fit was refused).
    privacy: Mapping[int, Mapping[str, float]] | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready record (client ids as string keys), keys in their documented order
        (docs/architecture.md, "How a round record is built")."""
        rec = self.report
        out: dict[str, Any] = {
            "round": self.round,
            "algorithm": self.algorithm,
            "primary_model": self.primary_model,
            "accuracy": {m: _str_keys(v) for m, v in rec.accuracy.items()},
            "mean_accuracy": {
                m: float(np.mean(list(v.values()))) for m, v in rec.accuracy.items() if v
            },
        }
        if rec.top5:
            out["top5"] = {m: _str_keys(v) for m, v in rec.top5.items()}
            out["mean_top5"] = {
                m: float(np.mean(list(v.values()))) for m, v in rec.top5.items() if v
            }
        for key, value in rec.info.items():
            out[key] = _str_keys(value) if isinstance(value, dict) else value
        out["bytes_up"] = _str_keys(self.bytes_up)
        out["bytes_down"] = _str_keys(self.bytes_down)
        if self.eval_bytes_down is not None:
            out["eval_bytes_down"] = _str_keys(self.eval_bytes_down)
        out["seconds"] = {k: round(v, 4) for k, v in self.seconds.items()}
        out["seconds"]["total"] = round(self.total_seconds, 4)
        if self.client_seconds is not None:
            out["client_seconds"] = {
                task: {str(c): round(s, 4) for c, s in sorted(v.items())}
                for task, v in self.client_seconds.items()
            }
        if self.round_trips is not None:
            out["round_trips"] = self.round_trips
        out["rejected"] = list(self.rejected)
        if self.missing is not None:
            out["missing"] = list(self.missing)
        if self.faults is not None:
            out["faults"] = list(self.faults)
        if self.byzantine is not None:
            out["byzantine"] = list(self.byzantine)
        if self.privacy is not None:
            out["privacy"] = {str(c): dict(v) for c, v in self.privacy.items()}
        return out


def _str_keys(d: Mapping[Any, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in d.items()}
