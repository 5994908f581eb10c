"""pFedHN's client side: plain local training of the generated model, and the recomputation
of its BatchNorm statistics before evaluation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmosfl.algorithms.pfedhn import HNTrain
from cosmosfl.core import protocol
from cosmosfl.core.tasks import OWN_MODEL, MetricsReply
from cosmosfl.handlers import params
from cosmosfl.handlers.base import ClientHandlers

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("pfedhn", base=params.HANDLERS)


@HANDLERS.handles(HNTrain)
def train_local(client: Participant, request: HNTrain) -> MetricsReply:
    x, y = client.train
    learner = params.torch_learner(client, OWN_MODEL, protocol.TRAIN_LOCAL)
    if request.recalibrate_bn:  # statistics only, no training
        return MetricsReply(learner.recalibrate_batchnorm(x))
    return MetricsReply(learner.fit(x, y, epochs=request.epochs))
