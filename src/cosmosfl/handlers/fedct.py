"""FedCT's client side: hard labels on U, and training on the private data together with U
labelled by the server's consensus."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cosmosfl.algorithms.fedct import ConsensusTrain, PredictLabels
from cosmosfl.core import protocol
from cosmosfl.core.tasks import LabelsReply, MetricsReply, ProbsReply
from cosmosfl.handlers import default
from cosmosfl.handlers.base import ClientHandlers

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("fedct", base=default.HANDLERS)


@HANDLERS.handles(PredictLabels)
def predict_public(client: Participant, request: PredictLabels) -> LabelsReply | ProbsReply:
    probs = client.learner.predict_proba(client.public())
    if not request.hard:
        return ProbsReply(probs)
    # Only the argmax travels, in the smallest integer type that holds the classes.
    return LabelsReply(probs.argmax(axis=1).astype(protocol.label_dtype(client.num_classes)))


@HANDLERS.handles(ConsensusTrain)
def train_local(client: Participant, request: ConsensusTrain) -> MetricsReply:
    x, y = client.train
    if request.public_labels is not None:
        x = np.concatenate([x, client.public()])
        y = np.concatenate([y, request.public_labels.astype(np.int64)])
    return MetricsReply(client.learner.fit(x, y, epochs=request.epochs))
