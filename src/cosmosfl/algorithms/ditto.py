"""Ditto: Fair and Robust Federated Learning Through Personalization (Li et al., ICML 2021).

Two models per client. The global model w is trained by FedAvg; each client also keeps a
personal model v_i, trained on its private data with the objective
F_i(v_i) + λ/2·||v_i − w^t||², w^t being the global model of the round (the paper's
Algorithm 1: the client updates v_i towards w^t, then runs its local update of w^t and sends
it). The personal model is what Ditto deploys and what we report (`personal_model`).

On the client, v_i is the client's own model (`learner`) and the local copy of w lives in the
model slot "global"; the proximal term is computed on the client (`prox_mu` = λ,
`prox_to` = "global"). λ = 0 reduces the personal models to local training: they never read
the global model (tested).

Hyperparameters (source):
- `prox_weight` = 1.0: the paper's λ, the weight of the proximal term (called `lam` before
  0.3, a name that elsewhere in cosmosfl means the weight of COSMOS's r_B; `lam` is still
  accepted, deprecated); the paper lets each device pick λ on validation data from
  {0.1, 1, 2} (no attacks) or {0.05, 0.1, 0.2} (strong attacks); we fix 1.0, the middle of the
  first grid (no per-client validation split exists here).
- `pretrain_epochs` = 5, `local_epochs` = 5: local epochs of both models in round 1 / later
  rounds (our conventions, as FedAvg); the paper's s local personal steps are expressed as
  epochs.

Wire: per client and round, the global model down and up (float32), plus one upload of the
initial weights in round 1. The personal model never leaves the client.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

from cosmosfl.algorithms.base import (
    Algorithm,
    Federation,
    RoundRecord,
    evaluate_clients,
    renamed_setting,
)
from cosmosfl.algorithms.hyperparameters import EpochSchedule
from cosmosfl.algorithms.params import GlobalModel, fetch_weights, push_weights, weighted_mean
from cosmosfl.core import protocol
from cosmosfl.core.constraints import Interval
from cosmosfl.core.tasks import OWN_MODEL, Request, always_sent

GLOBAL_SLOT = "global"


@dataclass(frozen=True)
class DittoTrain(Request):
    """train_local of the model in `slot` (the personal model v_i: the client's own), with
    the proximal term `prox_mu`/2·||v − w||² towards the model in slot `prox_to` if given."""

    task: ClassVar[str] = protocol.TRAIN_LOCAL
    epochs: int = always_sent(1)
    slot: str = OWN_MODEL
    prox_mu: float = 0.0
    prox_to: str | None = None


@dataclass
class Ditto(EpochSchedule, Algorithm):
    """FedAvg on a global model + personal models regularised towards it."""

    name: ClassVar[str] = "ditto"
    display_name: ClassVar[str] = "Ditto"
    reported_model: ClassVar[str] = "personal_model"
    model_agnostic: ClassVar[bool] = False
    client_handlers: ClassVar[str] = "cosmosfl.handlers.ditto:HANDLERS"
    parameter_constraints: ClassVar = {
        "prox_weight": Interval(float, 0, symbol="λ"),
    }
    renamed_parameters: ClassVar = {"lam": "prox_weight"}

    prox_weight: float = 1.0  # λ of λ/2·||v_i − w^t||²
    lam: InitVar[float | None] = None  # deprecated name of prox_weight
    _global: GlobalModel = field(default_factory=GlobalModel, init=False, repr=False)

    def __post_init__(self, lam: float | None) -> None:
        self.take_renamed("lam", lam)
        super().__post_init__()

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        g = self._global
        if g.weights is None:
            with fed.phase("initialisation"):
                g.initialise(fed, self.name)
        assert g.weights is not None
        with fed.phase("broadcast"):  # w^t into every client's "global" slot
            ready = sorted(push_weights(fed, dict.fromkeys(fed.client_ids, g.weights), GLOBAL_SLOT))
        epochs = self.epochs_for(round_num == 1)
        with fed.phase("personal_training"):  # v_i ← argmin F_i(v) + λ/2·||v − w^t||²
            personal = DittoTrain(epochs, prox_mu=float(self.prox_weight), prox_to=GLOBAL_SLOT)
            if self.prox_weight == 0:  # no proximal term: plain local training of v_i
                personal = DittoTrain(epochs)
            fed.send(dict.fromkeys(ready, personal))
        with fed.phase("local_training"):  # the client's FedAvg update of w^t
            trained = fed.send(dict.fromkeys(ready, DittoTrain(epochs, slot=GLOBAL_SLOT)))
        with fed.phase("upload"):
            fetched, counts = fetch_weights(fed, sorted(trained), self.name, g.weights, GLOBAL_SLOT)
        with fed.phase("aggregation"):
            if fetched:
                ids = sorted(fetched)
                g.weights = weighted_mean([fetched[c] for c in ids], [counts[c] for c in ids])
        with fed.phase("evaluation"):
            record.add_metrics("personal_model", evaluate_clients(fed))
        record.info["participants"] = len(fetched)
        return record

    def get_state(self) -> dict[str, Any]:
        return {"global": self._global.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._global.set_state(state["global"])


Ditto.lam = renamed_setting("lam", "prox_weight")  # type: ignore[assignment]
