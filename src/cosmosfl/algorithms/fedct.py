"""FedCT: federated co-training, sharing only hard labels (Abourayya et al., AAAI 2025).

Clients send only the *hard* labels (argmax) of their predictions on the public set U; the
server forms a consensus labelling of U by majority vote; every client then trains with
cross-entropy on its private data together with U labelled by the consensus. Only integer
labels cross the wire, |U| × 1 byte each way for up to 256 classes.

Hyperparameters (source):
- `pretrain_epochs` = 5: round-1 training on private data before the first vote (our E0
  convention, as COSMOS; the official code's first round also trains on local data only,
  because no consensus exists yet).
- `local_epochs` = 5: epochs on private data ∪ consensus-labelled U per round (our convention,
  as COSMOS; the paper trains one local round per communication, communication period b = 1).
- Consensus: plain majority vote, ties to the lowest class id (paper: "majority vote"; the
  official code, kampmichael/federatedcotraining `consensus.py`, takes `np.bincount(...)
  .argmax()`, which also breaks ties to the lowest id). No quorum threshold: neither the
  paper's abstract nor the official code uses one, so every sample of U is labelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from cosmosfl.algorithms.base import Algorithm, Federation, RoundRecord, evaluate_clients
from cosmosfl.algorithms.hyperparameters import EpochSchedule
from cosmosfl.core import protocol
from cosmosfl.core.tasks import Request, always_sent


def majority_vote(labels: Sequence[np.ndarray], num_classes: int) -> np.ndarray:
    """Per sample, the class most clients voted for; ties go to the lowest class id.

    `labels` holds one (n,) integer array per client with values in [0, num_classes).
    Returns an (n,) int64 array.
    """
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if len(labels) == 0:
        raise ValueError("cannot vote without any client labels")
    votes = np.stack([np.asarray(v) for v in labels])  # (K, n)
    if votes.ndim != 2 or not np.issubdtype(votes.dtype, np.integer):
        raise ValueError(
            f"each client's labels must be a 1-D integer array of the same length; "
            f"got shape {votes.shape[1:]} and dtype {votes.dtype}"
        )
    if votes.size and (votes.min() < 0 or votes.max() >= num_classes):
        raise ValueError(
            f"labels must lie in [0, {num_classes}), got [{votes.min()}, {votes.max()}]"
        )
    n = votes.shape[1]
    counts = np.zeros((n, num_classes), dtype=np.int64)
    np.add.at(counts, (np.broadcast_to(np.arange(n), votes.shape), votes.astype(np.int64)), 1)
    return counts.argmax(axis=1)  # argmax returns the first maximum: the lowest class id


@dataclass(frozen=True)
class PredictLabels(Request):
    """predict_public of FedCT: only the argmax of each prediction on U travels (`hard`)."""

    task: ClassVar[str] = protocol.PREDICT_PUBLIC
    hard: bool = always_sent(True)


@dataclass(frozen=True)
class ConsensusTrain(Request):
    """train_local on the private data together with U labelled by the server's consensus
    (`public_labels`, when sent)."""

    task: ClassVar[str] = protocol.TRAIN_LOCAL
    array_specs: ClassVar[Mapping[str, protocol.ArraySpec]] = {"public_labels": protocol.LABELS}
    epochs: int = always_sent(1)
    public_labels: np.ndarray | None = None


@dataclass
class FedCT(EpochSchedule, Algorithm):
    """FedCT: predict hard labels on U → majority vote → train on private data ∪ labelled U."""

    name: ClassVar[str] = "fedct"
    client_handlers: ClassVar[str] = "cosmosfl.handlers.fedct:HANDLERS"
    display_name: ClassVar[str] = "FedCT"
    reported_model: ClassVar[str] = "client_model"

    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        record = RoundRecord()
        m = fed.num_classes
        if round_num == 1:  # no consensus exists yet: private data only
            with fed.phase("local_training"):
                message = ConsensusTrain(self.pretrain_epochs)
                fed.send(dict.fromkeys(fed.client_ids, message))
        with fed.phase("prediction"):  # only the argmax travels
            replies = fed.send(
                dict.fromkeys(fed.client_ids, PredictLabels()),
                expect=protocol.HARD_LABELS_REPLY,
            )
        with fed.phase("aggregation"):
            votes = [np.asarray(replies[cid].arrays["labels"]) for cid in sorted(replies)]
            consensus = majority_vote(votes, m).astype(protocol.label_dtype(m))
        with fed.phase("local_training"):  # cross-entropy on D_i ∪ (U, consensus)
            message = ConsensusTrain(self.local_epochs, public_labels=consensus)
            fed.send(dict.fromkeys(fed.client_ids, message))
        with fed.phase("evaluation"):
            record.add_metrics("client_model", evaluate_clients(fed))
        # Mean fraction of U on which a client's vote equals the consensus (a diagnostic).
        agreement = np.mean([np.mean(v == consensus) for v in votes])
        record.info["consensus_agreement"] = float(agreement)
        return record
