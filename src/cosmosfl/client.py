"""A federated client: a Learner, its private data, its extra model slots, and `handle`.

Both engines serve clients through `Client.handle`, so a client behaves the same in-process
and over the network. What a task does is not decided here: `handle` passes each message to
the client's `handlers` (the running algorithm's `ClientHandlers`, cosmosfl/handlers/), so a
new algorithm brings its own client side without editing this module. The client's data never
leaves this object: replies carry only what the protocol allows (soft labels on the public
set, scalar metrics, and model weights for parameter-sharing baselines).
"""

from __future__ import annotations

import traceback
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cosmosfl.core import protocol
from cosmosfl.core.tasks import OWN_MODEL
from cosmosfl.handlers.base import ClientHandlers, resolve_handlers
from cosmosfl.learners.base import Learner

if TYPE_CHECKING:
    from cosmosfl.handlers.default import label_prior_weights

__all__ = ["Client", "label_prior_weights"]


def __getattr__(name: str) -> Any:
    # label_prior_weights is the default distill handler's (handlers/default.py); still
    # importable from here, looked up on use so that importing client.py loads no handler set.
    if name == "label_prior_weights":
        from cosmosfl.handlers.default import label_prior_weights

        return label_prior_weights
    raise AttributeError(f"module 'cosmosfl.client' has no attribute {name!r}")


def _model_agnostic_handlers() -> ClientHandlers:
    """The handlers a client has until an engine gives it its algorithm's: the model-agnostic
    tasks (handlers/default.py), resolved by reference as an algorithm's are."""
    return resolve_handlers(None)


def _check_xy(name: str, data: tuple[np.ndarray, np.ndarray], client_id: int) -> None:
    if not (isinstance(data, tuple) and len(data) == 2):
        raise TypeError(f"client {client_id}: {name} must be a tuple (x, y)")
    x, y = data
    if len(x) != len(y):
        raise ValueError(f"client {client_id}: {name} has {len(x)} inputs but {len(y)} labels")


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
    # Extra models of parameter-sharing baselines (Ditto's global copy, pFedCK's interactive
    # model, FedBABU's fine-tuned one), created on first use from `learner`; see `slot`.
    slots: dict[str, Learner] = field(default_factory=dict, repr=False)
    # Private samples held out of training, read only to choose between models (a validation
    # slice, `data.validation_fraction`); None when there is none.
    validation: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    # What each task does: the running algorithm's client side (engines set it from the
    # algorithm's `client_handlers`); by default the model-agnostic tasks.
    handlers: ClientHandlers = field(
        default_factory=_model_agnostic_handlers, repr=False, compare=False
    )

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

    def public(self) -> np.ndarray:
        """The public set U (attached by the engine)."""
        if self.public_x is None:
            raise RuntimeError(f"client {self.id} has no public set attached")
        return self.public_x

    def array_context(self) -> dict[str, int]:
        """The sizes a received array is checked against: n = |U|, m = classes."""
        return {"n": len(self.public()), "m": self.num_classes}

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

    def handle(self, message: protocol.Message) -> protocol.Reply:
        """Run one protocol task; any failure becomes an error reply the server can exclude."""
        try:
            return self.handlers.serve(self, message)
        except protocol.PayloadError as exc:
            return protocol.Reply(message.task, error=str(exc), error_kind="payload")
        except Exception as exc:  # the server decides what a failed client means
            return protocol.Reply(
                message.task,
                error=f"{type(exc).__name__}: {exc}",
                error_kind="exception",
                traceback=traceback.format_exc(),
            )

    def slot(self, name: str = OWN_MODEL) -> Learner:
        """The model a request names: `OWN_MODEL` is `learner`, any other name an extra model,
        created on first use as `learner.clone(seed)`: the same settings (a torch model with
        its current weights) and a random stream of its own)."""
        if name == OWN_MODEL:
            return self.learner
        if name not in self.slots:
            # A seed of its own, stable across runs, so the slot's shuffles differ from learner's
            # (a learner without a seed, scikit-learn's, is as random as its estimator says).
            own = int(getattr(self.learner, "seed", 0))
            seed = (own * 1_000_003 + zlib.crc32(name.encode())) % 2**63
            self.slots[name] = self.learner.clone(seed)
        return self.slots[name]
