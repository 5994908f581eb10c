"""The client side of the parameter-sharing baselines: model weights in and out of a slot.

FedAvg and FedSelect use these handlers as they are (the model-agnostic tasks plus
get_weights / set_weights); FedProx, Ditto, FedBABU, pFedCK and pFedHN start their own sets
from them. Weights need model parameters, which only torch client models have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmosfl.core import protocol
from cosmosfl.core.tasks import OWN_MODEL, GetWeights, MetricsReply, SetWeights, WeightsReply
from cosmosfl.handlers import default
from cosmosfl.handlers.base import ClientHandlers
from cosmosfl.learners.torch import TorchLearner

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("parameter-sharing", base=default.HANDLERS)


def torch_learner(client: Participant, slot: str, what: str) -> TorchLearner:
    """The torch model in `slot` (created on first use); a clear error for other learners."""
    if not isinstance(client.learner, TorchLearner):
        # Imported here: a client process needs the algorithm classes only for this message.
        from cosmosfl.algorithms.registry import ALGORITHMS

        task = what if slot == OWN_MODEL else f"slot {slot!r}"
        sharing = ", ".join(n for n, cls in ALGORITHMS.items() if not cls.model_agnostic)
        raise TypeError(
            f"client {client.id}: {task} is not served: it needs model parameters, which only "
            f"torch client models have ({type(client.learner).__name__} has none); "
            f"parameter-sharing algorithms ({sharing}) need torch clients of one architecture"
        )
    return client.slot(slot)  # type: ignore[return-value]


@HANDLERS.handles(GetWeights)
def get_weights(client: Participant, request: GetWeights) -> WeightsReply:
    weights = torch_learner(client, request.slot, protocol.GET_WEIGHTS).get_weights()
    return WeightsReply(weights, num_samples=float(len(client.train[0])))


@HANDLERS.handles(SetWeights)
def set_weights(client: Participant, request: SetWeights) -> MetricsReply:
    """Load weights after checking them against the model's own names, shapes and dtype."""
    learner = torch_learner(client, request.slot, protocol.SET_WEIGHTS)
    spec = protocol.weights_spec(learner.get_weights())
    arrays = protocol.validate_arrays(
        request.weights, spec, {}, client_id=None, task=protocol.SET_WEIGHTS
    )
    learner.set_weights(arrays)
    return MetricsReply()
