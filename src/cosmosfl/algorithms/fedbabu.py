"""FedBABU: Towards Enhanced Representation for Federated Image Classification
(Oh, Kim & Yun, ICLR 2022).

FedAvg in which only the body (feature extractor) is trained and aggregated: the head (the
last Linear layer) keeps its random initialisation during federated training ("the head is
randomly initialized and never updated"). For personalisation, each client fine-tunes on its
private data a copy of the global model (model slot "personal", re-initialised from the
global model every round) before evaluation; that fine-tuned model is what we report
(`personal_model`), with the global model beside it (`global_model`).

The head is frozen on the client (`train_local` with `freeze: head`); because every client
starts from the same random head and never changes it, the averaged head stays the initial one.

Hyperparameters (source):
- `pretrain_epochs` = 5, `local_epochs` = 5: as FedAvg (our conventions).
- `finetune_epochs` = 5: fine-tuning epochs before evaluation (τ_f); our choice, equal to the
  local epochs convention; the paper studies several fine-tuning lengths.
- `finetune` = "head": what is fine-tuned: "head" (the abstract: "the head is fine-tuned for
  personalization during the evaluation process", body frozen) or "full" (body and head).

Wire: as FedAvg (the whole model travels; the head part is constant and could be skipped).
Fine-tuning is local and costs no communication.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.algorithms.base import Federation, RoundRecord, evaluate_clients
from cosmosfl.algorithms.fedavg import FedAvg
from cosmosfl.algorithms.hyperparameters import EPOCHS
from cosmosfl.core import protocol
from cosmosfl.core.constraints import Options
from cosmosfl.core.tasks import OWN_MODEL, Evaluate, Request, always_sent

PERSONAL_SLOT = "personal"
FINETUNE = ("head", "full")


@dataclass(frozen=True)
class BabuTrain(Request):
    """train_local of the model in `slot`, first set to the weights of the model in slot
    `init_from` if given; `freeze` holds part of it fixed: "head" (train the body), "body"
    (train the head) or "" (nothing)."""

    task: ClassVar[str] = protocol.TRAIN_LOCAL
    epochs: int = always_sent(1)
    slot: str = OWN_MODEL
    init_from: str | None = None
    freeze: str = ""


@dataclass
class FedBABU(FedAvg):
    """FedAvg on the body with a frozen random head; head fine-tuning before evaluation."""

    name: ClassVar[str] = "fedbabu"
    display_name: ClassVar[str] = "FedBABU"
    reported_model: ClassVar[str] = "personal_model"
    client_handlers: ClassVar[str] = "cosmosfl.handlers.fedbabu:HANDLERS"
    parameter_constraints: ClassVar = {"finetune_epochs": EPOCHS, "finetune": Options(FINETUNE)}

    finetune_epochs: int = 5
    finetune: str = "head"

    def train_request(self, epochs: int) -> Request:
        return BabuTrain(epochs, freeze="head")

    def evaluate(self, fed: Federation, holders: list[int], record: RoundRecord) -> None:
        with fed.phase("evaluation"):
            record.add_metrics("global_model", evaluate_clients(fed, holders))
        with fed.phase("fine_tuning"):
            finetune = BabuTrain(
                self.finetune_epochs,
                slot=PERSONAL_SLOT,
                init_from=OWN_MODEL,  # start from the client's copy of the global model
                # `freeze` names the part kept fixed: "body" tunes the head
                freeze="body" if self.finetune == "head" else "",
            )
            tuned = fed.send(dict.fromkeys(holders, finetune))
        with fed.phase("evaluation"):
            replies = fed.send(dict.fromkeys(sorted(tuned), Evaluate(slot=PERSONAL_SLOT)))
            record.add_metrics("personal_model", {c: dict(r.metrics) for c, r in replies.items()})
