"""FedSelect: Personalized Federated Learning with Customized Selection of Parameters for
Fine-Tuning (Tamirisa et al., CVPR 2024).

Each client grows a personal subnetwork: a mask over its weight entries marking which are
personal (kept by the client) and which are shared (averaged across clients). Following the
lottery-ticket-style GradSelect, the entries whose values changed most during the client's
local training are moved from shared to personal, a fraction p of the remaining shared
entries of every weight tensor per selection step, until a tensor's personal fraction reaches
the limit α. Shared entries are averaged over the clients for which they are shared (weighted
by training-set size); an entry personal to every client keeps its previous global value.
Each client's model is its personal entries plus the global shared ones, and that model is
what we report (`personal_model`).

Implementation: the server computes the masks from what it sent and what came back (it sees
both) and keeps them as state; it sends each client its merged model (personal entries from the
client's own last upload, shared entries from the new average). Masks apply to tensors whose
name ends in "weight" (as the official code, which selects in "weight" tensors only); biases
and BatchNorm statistics are always shared.

Hyperparameters (source: the official code, lapisrocks/fedselect `utils/options.py`):
- `select_rate` = 0.25: p, the official `prune_percent` default 25;
- `max_personal` = 0.8: α, the official `prune_target` default 80;
- `select_every` = 1: rounds between selection steps (official `lth_epoch_iters` = 3 with
  15 local epochs per round; our runs have few rounds, so we select after every round);
- `pretrain_epochs` = 5, `local_epochs` = 5: our conventions (as FedAvg).

Deviations: the official LocalAlt optimiser alternates updates of personal and shared entries;
we train all entries jointly. The whole model travels both ways each round, so communication
equals FedAvg's (a client could send only its shared entries; we do not exploit that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.algorithms.hyperparameters import EpochSchedule
from cosmosfl.algorithms.params import GlobalModel, Weights, fetch_weights, push_weights
from cosmosfl.core.constraints import Interval
from cosmosfl.core.tasks import TrainLocal


def grow_mask(mask: np.ndarray, delta: np.ndarray, rate: float, limit: float) -> np.ndarray:
    """Move the fraction `rate` of still-shared entries with the largest |delta| to personal,
    unless the personal fraction already reaches `limit`."""
    mask = mask.copy()
    if mask.mean() >= limit:
        return mask
    shared = np.flatnonzero(~mask.ravel())
    take = min(round(rate * len(shared)), int(np.floor(limit * mask.size)) - int(mask.sum()))
    if take <= 0:
        return mask
    order = np.argsort(-np.abs(delta.ravel()[shared]), kind="stable")
    flat = mask.ravel()
    flat[shared[order[:take]]] = True
    return flat.reshape(mask.shape)


def masked_mean(
    uploads: list[Weights], counts: list[float], masks: list[dict[str, np.ndarray]], old: Weights
) -> Weights:
    """Per entry: the n_i-weighted mean over clients for which the entry is shared; the old
    value where it is personal to every answering client."""
    out: Weights = {}
    for name, previous in old.items():
        num = np.zeros(previous.shape, np.float64)
        den = np.zeros(previous.shape, np.float64)
        for w, n, m in zip(uploads, counts, masks, strict=True):
            shared = ~m[name] if name in m else np.ones(previous.shape, bool)
            num += n * shared * w[name]
            den += n * shared
        out[name] = np.where(den > 0, num / np.maximum(den, 1e-300), previous).astype(np.float32)
    return out


@dataclass
class FedSelect(EpochSchedule, Algorithm):
    """Per-client personal masks grown by update magnitude; FedAvg on the shared entries."""

    name: ClassVar[str] = "fedselect"
    display_name: ClassVar[str] = "FedSelect"
    reported_model: ClassVar[str] = "personal_model"
    model_agnostic: ClassVar[bool] = False
    client_handlers: ClassVar[str] = "cosmosfl.handlers.params:HANDLERS"
    parameter_constraints: ClassVar = {
        "select_rate": Interval(float, 0, 1, closed="right", symbol="p"),
        "max_personal": Interval(float, 0, 1, symbol="α"),
        "select_every": Interval(int, 1),
    }

    select_rate: float = 0.25
    max_personal: float = 0.8
    select_every: int = 1
    _global: GlobalModel = field(default_factory=GlobalModel, init=False, repr=False)
    _masks: dict[int, dict[str, np.ndarray]] = field(default_factory=dict, init=False, repr=False)
    _personal: dict[int, Weights] = field(default_factory=dict, init=False, repr=False)
    _sent: dict[int, Weights] = field(default_factory=dict, init=False, repr=False)

    def _model_for(self, cid: int) -> Weights:
        """Client cid's model: its personal entries, the global value elsewhere."""
        g = self._global.weights
        assert g is not None
        mask, own = self._masks.get(cid, {}), self._personal.get(cid)
        if own is None:
            return dict(g)
        return {n: np.where(mask[n], own[n], v) if n in mask else v for n, v in g.items()}

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        g = self._global
        if g.weights is None:
            with fed.phase("initialisation"):
                g.initialise(fed, self.name)
                assert g.weights is not None
                for cid in fed.client_ids:
                    self._masks[cid] = {
                        n: np.zeros(a.shape, bool)
                        for n, a in g.weights.items()
                        if n.endswith("weight")
                    }
        if g.stale:
            with fed.phase("broadcast"):
                models = {cid: self._model_for(cid) for cid in sorted(g.stale)}
                received = push_weights(fed, models)
                self._sent.update({c: models[c] for c in received})
                g.stale -= received
        ready = [cid for cid in fed.client_ids if cid not in g.stale]
        epochs = self.epochs_for(round_num == 1)
        with fed.phase("local_training"):
            trained = fed.send(dict.fromkeys(ready, TrainLocal(epochs)))
        with fed.phase("upload"):
            fetched, counts = fetch_weights(fed, sorted(trained), self.name, g.weights)
        with fed.phase("aggregation"):
            ids = sorted(fetched)
            if ids:
                g.weights = masked_mean(
                    [fetched[c] for c in ids],
                    [counts[c] for c in ids],
                    [self._masks[c] for c in ids],
                    g.weights,
                )
            select = round_num % self.select_every == 0
            for cid in ids:
                if select:  # GradSelect: the entries that moved most become personal
                    self._masks[cid] = {
                        n: grow_mask(
                            m,
                            fetched[cid][n] - self._sent[cid][n],
                            self.select_rate,
                            self.max_personal,
                        )
                        for n, m in self._masks[cid].items()
                    }
                self._personal[cid] = fetched[cid]
        g.stale = set(fed.client_ids)
        with fed.phase("broadcast"):
            models = {cid: self._model_for(cid) for cid in fed.client_ids}
            received = push_weights(fed, models)
            self._sent.update({c: models[c] for c in received})
            g.stale -= received
        with fed.phase("evaluation"):
            record.add_metrics("personal_model", evaluate_clients(fed, sorted(received)))
        record.info["participants"] = len(fetched)
        record.info["personal_fraction"] = float(
            np.mean(
                [
                    sum(int(m.sum()) for m in masks.values())
                    / max(sum(m.size for m in masks.values()), 1)
                    for masks in self._masks.values()
                ]
            )
        )
        return record

    def get_state(self) -> dict[str, Any]:
        def copy(d: dict[int, Weights]) -> dict[int, Weights]:
            return {c: {n: a.copy() for n, a in w.items()} for c, w in d.items()}

        return {
            "global": self._global.get_state(),
            "masks": copy(self._masks),
            "personal": copy(self._personal),
            "sent": copy(self._sent),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._global.set_state(state["global"])
        for key in ("masks", "personal", "sent"):
            restored = {
                int(c): {n: np.asarray(a).copy() for n, a in w.items()}
                for c, w in state[key].items()
            }
            setattr(self, f"_{key}", restored)
