"""Server-side steps shared by the parameter-sharing baselines (FedAvg, FedProx, Ditto, ...).

These baselines exchange model weights, so they need every client to run the same
architecture. Weights travel as `get_weights` / `set_weights` messages: one float32 array per
tensor, named as in the client's `state_dict`, validated on receipt (names, shapes, dtype,
finiteness) and counted in bytes by the engine like every other payload. The first reply fixes
the template every later reply must match.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cosmosfl.algorithms.base import Federation
from cosmosfl.core import protocol
from cosmosfl.core.tasks import OWN_MODEL, GetWeights, SetWeights, WeightsReply

Weights = dict[str, np.ndarray]


class ArchitectureMismatch(ValueError):
    """Clients sent weights of different shapes: the method needs one architecture."""


def describe(weights: Mapping[str, np.ndarray]) -> str:
    count = sum(int(np.asarray(a).size) for a in weights.values())
    return f"{len(weights)} tensors, {count} values"


def check_same_architecture(weights: Mapping[int, Weights], method: str) -> Weights:
    """Return the lowest id's weights as the template; raise if any client's names or shapes
    differ from it (a federation that mixes architectures)."""
    ids = sorted(weights)
    first = weights[ids[0]]
    shapes = {n: a.shape for n, a in first.items()}
    for cid in ids[1:]:
        other = {n: a.shape for n, a in weights[cid].items()}
        if other != shapes:
            diff = sorted(n for n in set(shapes) | set(other) if shapes.get(n) != other.get(n))
            raise ArchitectureMismatch(
                f"{method} exchanges model parameters and needs every client to use the same "
                f"architecture, but client {cid}'s model ({describe(weights[cid])}) differs from "
                f"client {ids[0]}'s ({describe(first)}) in {', '.join(diff[:3])}"
                f"{' ...' if len(diff) > 3 else ''}; give all clients one model "
                "(e.g. clients.models: {cnn: 1.0}) or use a model-agnostic algorithm (cosmos)"
            )
    return {n: a.copy() for n, a in first.items()}


def fetch_weights(
    fed: Federation,
    client_ids: Iterable[int],
    method: str,
    template: Weights | None,
    slot: str = OWN_MODEL,
) -> tuple[dict[int, Weights], dict[int, float]]:
    """Ask clients for the weights of model `slot`; returns (weights, training-set sizes) of
    those whose reply passed validation. Without a template, replies are checked against each
    other (mixing architectures raises ArchitectureMismatch)."""
    expect = protocol.WEIGHTS_ANY if template is None else protocol.weights_spec(template)
    replies = fed.send(dict.fromkeys(client_ids, GetWeights(slot)), expect)
    received = {cid: WeightsReply.from_reply(r) for cid, r in replies.items()}
    weights = {cid: dict(r.weights) for cid, r in received.items()}
    if template is None and weights:
        check_same_architecture(weights, method)
    counts = {cid: max(r.num_samples, 0.0) for cid, r in received.items()}
    return weights, counts


def push_weights(
    fed: Federation, weights: Mapping[int, Mapping[str, np.ndarray]], slot: str = OWN_MODEL
) -> set[int]:
    """Send each client its weights for model `slot`; returns the ids that accepted them."""
    messages = {
        cid: SetWeights({n: np.asarray(a, np.float32) for n, a in w.items()}, slot)
        for cid, w in weights.items()
    }
    return set(fed.send(messages))


def weighted_mean(weights: list[Weights], counts: list[float]) -> Weights:
    """Σ n_i·w_i / Σ n_i per tensor (FedAvg's aggregation); equal weights if all n_i are 0."""
    w = np.asarray(counts, dtype=np.float64)
    w = w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / len(w))
    return {
        name: sum(wi * m[name].astype(np.float64) for wi, m in zip(w, weights, strict=True)).astype(
            np.float32
        )
        for name in weights[0]
    }


@dataclass
class GlobalModel:
    """One shared model on the server: its weights, the template, and who holds a stale copy."""

    weights: Weights | None = None
    stale: set[int] = field(default_factory=set)

    def initialise(self, fed: Federation, method: str) -> None:
        """Start from the lowest-id client's initial weights (the server owns no architecture);
        fetching from every client also checks that they share one architecture."""
        fetched, _ = fetch_weights(fed, fed.client_ids, method, None)
        self.weights = check_same_architecture(fetched, method)
        self.stale = set(fed.client_ids)

    def get_state(self) -> dict[str, Any]:
        return {
            "weights": None
            if self.weights is None
            else {k: v.copy() for k, v in self.weights.items()},
            "stale": sorted(self.stale),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        w = state.get("weights")
        self.weights = None if w is None else {k: np.asarray(v, np.float32) for k, v in w.items()}
        self.stale = {int(c) for c in state.get("stale", [])}
