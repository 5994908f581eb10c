"""FedProx: Federated Optimization in Heterogeneous Networks (Li et al., MLSys 2020).

FedAvg whose clients minimise F_i(w) + μ/2·||w − w^t||² locally, w^t being the global model
they received; the proximal term limits how far heterogeneous clients drift. The term is
computed on the client (`train_local` with `prox_mu`; the reference is the weights at the start
of local training, i.e. w^t). Everything else, including evaluation of the global model, is
FedAvg (see fedavg.py).

Hyperparameters (source):
- `mu` = 0.01: μ; the paper tunes μ over {0.001, 0.01, 0.1, 1} per dataset; 0.01 is the middle
  of that grid (not tuned here). μ = 0 is exactly FedAvg.
- `pretrain_epochs` = 5, `local_epochs` = 5: as FedAvg. The paper's partial-work tolerance
  (stragglers doing fewer epochs) is not simulated: every client runs all its epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.algorithms.fedavg import FedAvg
from cosmosfl.core import protocol
from cosmosfl.core.constraints import Interval
from cosmosfl.core.tasks import Request, always_sent


@dataclass(frozen=True)
class ProxTrain(Request):
    """train_local with μ/2·||w − w^t||², w^t the weights at the start of training."""

    task: ClassVar[str] = protocol.TRAIN_LOCAL
    epochs: int = always_sent(1)
    prox_mu: float = always_sent(0.0)


@dataclass
class FedProx(FedAvg):
    """FedAvg with a proximal term μ/2·||w − w^t||² in every client's local objective."""

    name: ClassVar[str] = "fedprox"
    display_name: ClassVar[str] = "FedProx"
    client_handlers: ClassVar[str] = "cosmosfl.handlers.fedprox:HANDLERS"
    parameter_constraints: ClassVar = {"mu": Interval(float, 0, symbol="μ")}

    mu: float = 0.01

    def train_request(self, epochs: int) -> Request:
        return ProxTrain(epochs, float(self.mu))
