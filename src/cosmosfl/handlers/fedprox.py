"""FedProx's client side: local training with μ/2·||w − w^t||², w^t the weights received."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmosfl.algorithms.fedprox import ProxTrain
from cosmosfl.core import protocol
from cosmosfl.core.tasks import OWN_MODEL, MetricsReply
from cosmosfl.handlers import params
from cosmosfl.handlers.base import ClientHandlers
from cosmosfl.learners.torch_terms import proximal_term

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("fedprox", base=params.HANDLERS)


@HANDLERS.handles(ProxTrain)
def train_local(client: Participant, request: ProxTrain) -> MetricsReply:
    x, y = client.train
    learner = params.torch_learner(client, OWN_MODEL, protocol.TRAIN_LOCAL)
    terms = [proximal_term(learner, request.prox_mu)] if request.prox_mu > 0 else []
    return MetricsReply(learner.fit(x, y, epochs=request.epochs, extra_losses=terms))
