"""pFedCK's client side: the interactive model (slot "interactive") and the personalized one
(the client's own) each trained on labels plus distillation towards the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmosfl.algorithms.pfedck import MutualTrain
from cosmosfl.core import protocol
from cosmosfl.core.tasks import MetricsReply
from cosmosfl.handlers import params
from cosmosfl.handlers.base import ClientHandlers
from cosmosfl.learners.torch_terms import distillation_term

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("pfedck", base=params.HANDLERS)


@HANDLERS.handles(MutualTrain)
def train_local(client: Participant, request: MutualTrain) -> MetricsReply:
    x, y = client.train
    student = params.torch_learner(client, request.slot, protocol.TRAIN_LOCAL)
    teacher = params.torch_learner(client, request.distill_from, protocol.TRAIN_LOCAL)
    term = distillation_term(teacher, request.kd_weight, request.kd_temperature)
    terms = [term] if request.kd_weight > 0 else []
    return MetricsReply(student.fit(x, y, epochs=request.epochs, extra_losses=terms))
