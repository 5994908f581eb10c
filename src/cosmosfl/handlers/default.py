"""The model-agnostic client tasks, served from the `Learner` contract alone: train_local
(`fit`), predict_public (`predict_proba`), distill (`distill`) and evaluate.

COSMOS, local, FedMD and COMET use these as they are; other algorithms start their handler
sets from them (`ClientHandlers(name, base=HANDLERS)`). No torch here: any learner works.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cosmosfl.core import protocol
from cosmosfl.core.tasks import (
    Distill,
    Evaluate,
    MetricsReply,
    PredictPublic,
    ProbsReply,
    TrainLocal,
)
from cosmosfl.handlers.base import ClientHandlers
from cosmosfl.handlers.gate import deployed_mix, gated_distill

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

HANDLERS = ClientHandlers("model-agnostic")


def label_prior_weights(
    train_labels: np.ndarray, targets: np.ndarray, num_classes: int
) -> np.ndarray:
    """Importance weights w_i(x) = π_i(ŷ(x)) / π̂_U(ŷ(x)), normalised to mean 1.

    π_i is the client's own label histogram, ŷ the teacher's predicted class and π̂_U the
    teacher's predicted class shares on U: everything a client really has (no public labels).
    """
    prior = np.bincount(train_labels, minlength=num_classes).astype(np.float64)
    prior /= max(prior.sum(), 1.0)
    predicted = targets.argmax(axis=1)
    shares = np.bincount(predicted, minlength=num_classes).astype(np.float64) / len(predicted)
    w = prior[predicted] / shares[predicted]
    mean = w.mean()
    if mean <= 0:  # the client holds none of the predicted classes: fall back to w = 1
        return np.ones(len(predicted), dtype=np.float32)
    return (w / mean).astype(np.float32)


@HANDLERS.handles(TrainLocal)
def train_local(client: Participant, request: TrainLocal) -> MetricsReply:
    """Supervised epochs on the private data."""
    x, y = client.train
    return MetricsReply(client.learner.fit(x, y, epochs=request.epochs))


@HANDLERS.handles(PredictPublic)
def predict_public(client: Participant, request: PredictPublic) -> ProbsReply:
    """Soft labels on U in the codec the server chose (float32 is the reference)."""
    return ProbsReply(client.learner.predict_proba(client.public()), request.codec)


@HANDLERS.handles(Distill)
def distill(client: Participant, request: Distill) -> MetricsReply:
    """Fit the client's model to the targets on U (+ λ·r_B), optionally importance-weighted."""
    weights, mode = request.weights, request.client_weights or "uniform"
    if mode not in protocol.CLIENT_WEIGHTS:
        raise ValueError(f"client_weights {mode!r}; allowed: {', '.join(protocol.CLIENT_WEIGHTS)}")
    if mode == "label-prior":
        prior = label_prior_weights(client.train[1], request.targets, client.num_classes)
        weights = prior if weights is None else weights * prior
    public = client.public()

    def distil(targets: np.ndarray) -> dict[str, float]:
        return client.learner.distill(
            public, targets, weights, epochs=request.epochs, lam=request.lam
        )

    if not request.gate:
        return MetricsReply(distil(request.targets))
    candidates = [request.targets]
    if request.alternative is not None:
        candidates.append(request.alternative)
    return MetricsReply(gated_distill(client, candidates, distil, request.gate_margin))


@HANDLERS.handles(Evaluate)
def evaluate(client: Participant, request: Evaluate) -> MetricsReply:
    """Metrics of one of the client's models on its own test (or validation) split."""
    split = client.split(request.split)
    if request.mix_test is not None and request.mix_validation is not None:
        return MetricsReply(
            deployed_mix(client, request.mix_validation, request.mix_test, request.split)
        )
    return MetricsReply(client.slot(request.slot).evaluate(*split))
