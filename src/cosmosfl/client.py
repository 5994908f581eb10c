"""A federated client: a Learner, its private data, and the handler for protocol tasks.

Both engines serve clients through `Client.handle`, so a client behaves the same in-process
and over the network. The client's data never leaves this object: replies carry only what the
protocol allows (soft labels on the public set, scalar metrics).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import numpy as np

from cosmosfl.core import codecs
from cosmosfl.core import protocol as P
from cosmosfl.learners.base import Learner

CLIENT_WEIGHTS = ("uniform", "label-prior")


def _check_xy(name: str, data: tuple[np.ndarray, np.ndarray], client_id: int) -> None:
    if not (isinstance(data, tuple) and len(data) == 2):
        raise TypeError(f"client {client_id}: {name} must be a tuple (x, y)")
    x, y = data
    if len(x) != len(y):
        raise ValueError(f"client {client_id}: {name} has {len(x)} inputs but {len(y)} labels")


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


@dataclass
class Client:
    """One participant: `id`, a `learner`, private `train` = (x, y) and `test` = (x, y).

    `public_x` (the shared unlabeled set U) is attached by the engine.
    """

    id: int
    learner: Learner
    train: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]
    public_x: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_xy("train", self.train, self.id)
        _check_xy("test", self.test, self.id)
        if len(self.train[0]) == 0:
            raise ValueError(f"client {self.id} has no training data")

    @property
    def num_classes(self) -> int:
        return self.learner.num_classes

    def handle(self, message: P.Message) -> P.Reply:
        """Run one protocol task; any failure becomes an error reply the server can exclude."""
        try:
            return self._dispatch(message)
        except P.PayloadError as exc:
            return P.Reply(message.task, error=str(exc), error_kind="payload")
        except Exception as exc:  # the server decides what a failed client means
            return P.Reply(
                message.task,
                error=f"{type(exc).__name__}: {exc}",
                error_kind="exception",
                traceback=traceback.format_exc(),
            )

    def _dispatch(self, message: P.Message) -> P.Reply:
        task, cfg = message.task, message.config
        if task == P.TRAIN_LOCAL:
            return P.Reply(task, metrics=self._train_local(message))
        if task == P.PREDICT_PUBLIC:
            probs = self.learner.predict_proba(self._public())
            if cfg.get("hard", False):  # only the argmax travels (FedCT)
                labels = probs.argmax(axis=1).astype(P.label_dtype(self.num_classes))
                return P.Reply(task, arrays={"labels": labels})
            # The server chooses the payload codec; float32 is the reference.
            codec = str(cfg.get("codec", "float32"))
            return P.Reply(task, arrays=codecs.encode_probs(probs, codecs.check_codec(codec)))
        if task == P.DISTILL:
            return P.Reply(task, metrics=self._distill(message))
        if task == P.EVALUATE:
            return P.Reply(task, metrics=self.learner.evaluate(*self.test))
        raise ValueError(f"task {task!r} is not served by model-agnostic clients")

    def _train_local(self, message: P.Message) -> dict[str, float]:
        """Supervised epochs on the private data, plus U with server labels if sent (FedCT)."""
        x, y = self.train
        if message.arrays:
            public = self._public()
            arrays = P.validate_arrays(
                message.arrays,
                P.REQUEST_SPECS[P.TRAIN_LOCAL],
                {"n": len(public), "m": self.num_classes},
                client_id=None,
                task=P.TRAIN_LOCAL,
                required=False,
            )
            if "public_labels" in arrays:
                x = np.concatenate([x, public])
                y = np.concatenate([y, arrays["public_labels"].astype(np.int64)])
        return self.learner.fit(x, y, epochs=int(message.config.get("epochs", 1)))

    def _public(self) -> np.ndarray:
        if self.public_x is None:
            raise RuntimeError(f"client {self.id} has no public set attached")
        return self.public_x

    def _distill(self, message: P.Message) -> dict[str, float]:
        public = self._public()
        context = {"n": len(public), "m": self.num_classes}
        received = codecs.decode_arrays(
            message.arrays, context, client_id=None, task=P.DISTILL
        )  # targets may arrive encoded (uint8, top-k)
        arrays = P.validate_arrays(
            received,
            P.REQUEST_SPECS[P.DISTILL],
            context,
            client_id=None,
            task=P.DISTILL,
            required=False,
        )
        if "targets" not in arrays:
            raise ValueError("distill request carries no 'targets'")
        targets, weights = arrays["targets"], arrays.get("weights")
        mode = str(message.config.get("client_weights", "uniform"))
        if mode not in CLIENT_WEIGHTS:
            raise ValueError(f"client_weights {mode!r}; allowed: {', '.join(CLIENT_WEIGHTS)}")
        if mode == "label-prior":
            prior = label_prior_weights(self.train[1], targets, self.num_classes)
            weights = prior if weights is None else weights * prior
        return self.learner.distill(
            public,
            targets,
            weights,
            epochs=int(message.config.get("epochs", 1)),
            lam=float(message.config.get("lam", 0.0)),
        )
