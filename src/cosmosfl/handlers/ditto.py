"""Ditto's client side: the personal model trained with a proximal term towards the client's
copy of the global model (slot "global"), the global copy trained plainly."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmosfl.algorithms.ditto import DittoTrain
from cosmosfl.core import protocol
from cosmosfl.core.tasks import MetricsReply
from cosmosfl.handlers import params
from cosmosfl.handlers.base import ClientHandlers
from cosmosfl.learners.torch_terms import proximal_term

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("ditto", base=params.HANDLERS)


@HANDLERS.handles(DittoTrain)
def train_local(client: Participant, request: DittoTrain) -> MetricsReply:
    x, y = client.train
    learner = params.torch_learner(client, request.slot, protocol.TRAIN_LOCAL)
    terms = []
    if request.prox_mu > 0:  # v_i ← argmin F_i(v) + λ/2·||v − w^t||²
        reference = None
        if request.prox_to is not None:
            ref = params.torch_learner(client, request.prox_to, protocol.TRAIN_LOCAL)
            reference = dict(ref.model.named_parameters())
        terms.append(proximal_term(learner, request.prox_mu, reference))
    return MetricsReply(learner.fit(x, y, epochs=request.epochs, extra_losses=terms))
