"""FedBABU's client side: training with a frozen head (the federated body) or a frozen body
(head fine-tuning of the personal copy, restarted from the global model every round)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmosfl.algorithms.fedbabu import BabuTrain
from cosmosfl.core import protocol
from cosmosfl.core.tasks import MetricsReply
from cosmosfl.handlers import params
from cosmosfl.handlers.base import ClientHandlers
from cosmosfl.learners.torch import TorchLearner

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("fedbabu", base=params.HANDLERS)
FREEZE = ("", "head", "body")


def frozen_parameters(learner: TorchLearner, freeze: str) -> set[str]:
    """The parameter names `freeze` holds fixed: "head" (the last Linear/Conv2d layer),
    "body" (everything else) or "" (none)."""
    if freeze not in FREEZE:
        raise ValueError(f"freeze {freeze!r}; allowed: {', '.join(map(repr, FREEZE))}")
    if not freeze:
        return set()
    head = set(learner.head_names())
    names = {n for n, _ in learner.model.named_parameters()}
    return head if freeze == "head" else names - head


@HANDLERS.handles(BabuTrain)
def train_local(client: Participant, request: BabuTrain) -> MetricsReply:
    x, y = client.train
    learner = params.torch_learner(client, request.slot, protocol.TRAIN_LOCAL)
    if request.init_from is not None:  # start from another model's weights (fine-tuning)
        source = params.torch_learner(client, request.init_from, protocol.TRAIN_LOCAL)
        learner.set_weights(source.get_weights())
    frozen = frozen_parameters(learner, request.freeze)
    return MetricsReply(learner.fit(x, y, epochs=request.epochs, frozen=frozen))
