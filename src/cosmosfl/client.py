"""A federated client: a Learner, its private data, and the handler for protocol tasks.

Both engines serve clients through `Client.handle`, so a client behaves the same in-process
and over the network. The client's data never leaves this object: replies carry only what the
protocol allows (soft labels on the public set, scalar metrics).
"""

from __future__ import annotations

import traceback
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cosmosfl.core import codecs
from cosmosfl.core import protocol as P
from cosmosfl.learners.base import Learner
from cosmosfl.learners.torch import TorchLearner

# train_local config keys of the parameter-sharing baselines; without them a client trains
# exactly as model-agnostic algorithms expect.
PARAMETER_TRAIN_KEYS = frozenset(
    {
        "slot",
        "init_from",
        "prox_mu",
        "prox_to",
        "freeze",
        "distill_from",
        "kd_weight",
        "recalibrate_bn",
    }
)


def _torch_learner(learner: Learner, client_id: int, what: str) -> TorchLearner:
    if not isinstance(learner, TorchLearner):
        raise TypeError(
            f"client {client_id}: {what} is not served: it needs model parameters, which only "
            f"torch client models have ({type(learner).__name__} has none); parameter-sharing "
            "algorithms "
            "(fedavg, fedprox, ditto, fedbabu, fedselect, pfedck, pfedhn) need torch clients "
            "of one architecture"
        )
    return learner


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
    # Extra models for parameter-sharing baselines (Ditto's global copy, pFedCK's interactive
    # model, FedBABU's fine-tuned head), created on first use from `learner`; see `slot`.
    slots: dict[str, Learner] = field(default_factory=dict, repr=False)
    # Private samples held out of training, read only to choose between models (a validation
    # slice, `data.validation_fraction`); None when there is none.
    validation: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_xy("train", self.train, self.id)
        _check_xy("test", self.test, self.id)
        if self.validation is not None:
            _check_xy("validation", self.validation, self.id)
        if len(self.train[0]) == 0:
            raise ValueError(f"client {self.id} has no training data")

    def split(self, name: str = "test") -> tuple[np.ndarray, np.ndarray]:
        """The data an evaluation reads: "test" or "validation" (never the training data)."""
        if name == "test":
            return self.test
        if name == "validation":
            if self.validation is None:
                raise ValueError(
                    f"client {self.id} has no validation slice: set data.validation_fraction"
                )
            return self.validation
        raise ValueError(f"evaluation split {name!r} is not one of: test, validation")

    @property
    def num_classes(self) -> int:
        return self.learner.num_classes

    def get_state(self) -> dict[str, Any]:
        """What changes as the client trains (its learner, including the learner's RNG, and
        every model slot), for checkpoints; the data and U are rebuilt from the config."""
        return {
            "id": self.id,
            "learner": self.learner.get_state(),
            "slots": {name: learner.get_state() for name, learner in self.slots.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state["id"] != self.id:
            raise ValueError(f"the state of client {state['id']} is not client {self.id}'s")
        self.learner.set_state(state["learner"])
        slots = state.get("slots", {})
        for name in set(self.slots) - set(slots):  # slots made after that state was taken
            del self.slots[name]
        for name, learner_state in slots.items():
            self.slot(name).set_state(learner_state)

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
            split = self.split(str(cfg.get("split", "test")))
            return P.Reply(task, metrics=self.slot(cfg).evaluate(*split))
        if task == P.GET_WEIGHTS:
            weights = _torch_learner(self.slot(cfg), self.id, task).get_weights()
            return P.Reply(task, arrays=weights, metrics={"num_samples": float(len(self.train[0]))})
        if task == P.SET_WEIGHTS:
            self._set_weights(message)
            return P.Reply(task)
        raise ValueError(f"task {task!r} is not served by model-agnostic clients")

    # -- model slots and parameter tasks (homogeneous-architecture baselines) -----------------
    def slot(self, config: Mapping[str, P.Scalar] | str = "") -> Learner:
        """The learner a task addresses: config["slot"] names an extra model ("" = `learner`).

        An extra slot starts as a copy of `learner` (same weights, its own random stream).
        """
        name = config if isinstance(config, str) else str(config.get("slot", ""))
        if not name:
            return self.learner
        if name not in self.slots:
            base = _torch_learner(self.learner, self.id, f"slot {name!r}")
            # A seed of its own, stable across runs, so the slot's shuffles differ from learner's.
            seed = (base.seed * 1_000_003 + zlib.crc32(name.encode())) % 2**63
            self.slots[name] = base.clone(seed)
        return self.slots[name]

    def _set_weights(self, message: P.Message) -> None:
        learner = _torch_learner(self.slot(message.config), self.id, P.SET_WEIGHTS)
        own = learner.get_weights()
        arrays = P.validate_arrays(
            message.arrays, P.weights_spec(own), {}, client_id=None, task=P.SET_WEIGHTS
        )
        learner.set_weights(arrays)

    def _train_options(self, cfg: Mapping[str, P.Scalar]) -> dict[str, Any]:
        """fit() options of parameter-sharing baselines, from message config keys."""
        options: dict[str, Any] = {}
        if "init_from" in cfg:  # start from another slot's weights (FedBABU fine-tuning)
            source = _torch_learner(self.slot(str(cfg["init_from"])), self.id, P.TRAIN_LOCAL)
            _torch_learner(self.slot(cfg), self.id, P.TRAIN_LOCAL).set_weights(source.get_weights())
        if float(cfg.get("prox_mu", 0.0)) > 0:
            options["prox_mu"] = float(cfg["prox_mu"])
            if "prox_to" in cfg:  # reference = another slot's current weights (Ditto)
                ref = _torch_learner(self.slot(str(cfg["prox_to"])), self.id, P.TRAIN_LOCAL)
                options["prox_ref"] = dict(ref.model.named_parameters())
        if cfg.get("freeze", ""):
            options["freeze"] = str(cfg["freeze"])
        if "distill_from" in cfg:  # pFedCK: KD from another slot's predictions
            options["teacher"] = _torch_learner(
                self.slot(str(cfg["distill_from"])), self.id, P.TRAIN_LOCAL
            )
            options["kd_weight"] = float(cfg.get("kd_weight", 1.0))
            options["kd_temperature"] = float(cfg.get("kd_temperature", 1.0))
        return options

    def _train_local(self, message: P.Message) -> dict[str, float]:
        """Supervised epochs on the private data, plus U with server labels if sent (FedCT)."""
        if PARAMETER_TRAIN_KEYS & set(message.config):
            x, y = self.train
            learner = _torch_learner(self.slot(message.config), self.id, P.TRAIN_LOCAL)
            if message.config.get("recalibrate_bn", False):  # statistics only, no training
                return learner.recalibrate_batchnorm(x)
            options = self._train_options(message.config)
            return learner.fit(x, y, epochs=int(message.config.get("epochs", 1)), **options)
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
        if mode not in P.CLIENT_WEIGHTS:
            raise ValueError(f"client_weights {mode!r}; allowed: {', '.join(P.CLIENT_WEIGHTS)}")
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
