"""FedAvg: Communication-Efficient Learning of Deep Networks from Decentralized Data
(McMahan et al., AISTATS 2017).

Per round: every client holding the current global model w trains it for E local epochs on its
private data and uploads it; the server replaces w by the average of the uploads weighted by
the clients' training-set sizes n_i (Σ n_i·w_i / Σ n_i, the paper's "FederatedAveraging");
the new w is broadcast and evaluated on every client's own test split (`global_model`, the
model FedAvg deploys).

The server owns no architecture: round 1 starts from the lowest-id client's initial weights
(fetching every client's initial weights also checks that all share one architecture).

Hyperparameters (source):
- `pretrain_epochs` = 5: local epochs in round 1 (our E0 convention, as COSMOS and `local`, so
  every algorithm gets the same number of local epochs on the same schedule);
- `local_epochs` = 5: E, local epochs in later rounds (the paper's E ∈ {1, 5, 20}; 5 is also
  our convention, docs/cosmos.md);
- client fraction C = 1 (all clients every round, as every algorithm here); the batch size and
  optimiser are the client learner's (Adam 1e-3, batch 32; the paper uses plain SGD).

Wire: per client and round, one model down and one up (float32); round 1 adds one upload of
the initial weights and one download of the starting model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.algorithms.hyperparameters import EpochSchedule
from cosmosfl.algorithms.params import GlobalModel, fetch_weights, push_weights, weighted_mean
from cosmosfl.core.tasks import Request, TrainLocal


@dataclass
class FedAvg(EpochSchedule, Algorithm):
    """Weighted averaging of locally trained copies of one global model."""

    name: ClassVar[str] = "fedavg"
    display_name: ClassVar[str] = "FedAvg"
    reported_model: ClassVar[str] = "global_model"
    model_agnostic: ClassVar[bool] = False
    client_handlers: ClassVar[str] = "cosmosfl.handlers.params:HANDLERS"

    _global: GlobalModel = field(default_factory=GlobalModel, init=False, repr=False)

    def train_request(self, epochs: int) -> Request:
        """The train_local request of one round (FedProx adds its proximal term)."""
        return TrainLocal(epochs)

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        g = self._global
        if g.weights is None:
            with fed.phase("initialisation"):
                g.initialise(fed, self.name)
        assert g.weights is not None
        if g.stale:  # round 1, or clients that missed the last broadcast
            with fed.phase("broadcast"):
                g.stale -= push_weights(fed, dict.fromkeys(sorted(g.stale), g.weights))
        # A client that still lacks the current model would train a stale one: it sits out.
        ready = [cid for cid in fed.client_ids if cid not in g.stale]
        epochs = self.epochs_for(round_num == 1)
        with fed.phase("local_training"):
            trained = fed.send(dict.fromkeys(ready, self.train_request(epochs)))
        with fed.phase("upload"):
            fetched, counts = fetch_weights(fed, sorted(trained), self.name, g.weights)
        with fed.phase("aggregation"):
            if fetched:  # nobody answered: keep the previous global model
                ids = sorted(fetched)
                g.weights = weighted_mean([fetched[c] for c in ids], [counts[c] for c in ids])
        g.stale = set(fed.client_ids)
        with fed.phase("broadcast"):
            received = push_weights(fed, dict.fromkeys(fed.client_ids, g.weights))
            g.stale -= received
        self.evaluate(fed, sorted(received), record)
        record.info["participants"] = len(fetched)
        return record

    def evaluate(self, fed: Federation, holders: list[int], record: RoundRecord) -> None:
        """Measure the deployed model on the clients that hold the new global model."""
        with fed.phase("evaluation"):
            record.add_metrics("global_model", evaluate_clients(fed, holders))

    def get_state(self) -> dict[str, Any]:
        return {"global": self._global.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._global.set_state(state["global"])
