"""Typed task requests and replies: what an algorithm sends and a client handler answers.

A request is a frozen dataclass that names its task (`task`) and carries its settings and
arrays as typed fields; a reply type says what a handler answers. Both map to the wire form of
core/protocol (`Message` and `Reply`: a config dict of scalars plus named arrays), which is what
engines deliver, validate and count and what Flower records carry, so a typed request travels
as exactly the bytes of the dict it replaces.

The wire form of a request (`config`, `arrays`, `from_message`):
- an array field (`np.ndarray | None`) travels under its name when it is not None;
- a scalar field travels under its name unless it is None or equals its default; a field made
  with `always_sent(default)` travels even at its default;
- read back, every config key must name a field (a request reached handlers that do not know
  it: refused), values take their field's type, arrays are validated against `array_specs`.
A request whose wire form differs (encoded arrays, a mapping of arrays) overrides these.

Model slots: a client may hold extra models beside its own (Ditto's copy of the global model,
FedBABU's fine-tuned one); a request names one by its slot name, and `OWN_MODEL` names the
client's own model (`Client.learner`).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np

from cosmosfl.core import codecs, protocol

# The client's own model where a request names a model slot (on the wire: the empty name).
OWN_MODEL = ""

_ALWAYS, _WIRE = "always_sent", "wire"


def always_sent(default: Any) -> Any:
    """A request field that travels even when it holds its default (e.g. `epochs`)."""
    return field(default=default, metadata={_ALWAYS: True})


def not_sent(default: Any) -> Any:
    """A request field for the sender only (e.g. how to encode the arrays): never travels."""
    return field(default=default, metadata={_WIRE: False})


@functools.cache
def _wire_fields(cls: type) -> dict[str, type]:
    """Each travelling field's wire type: np.ndarray for arrays, else its scalar type."""
    hints = typing.get_type_hints(cls)
    out: dict[str, type] = {}
    for f in dataclasses.fields(cls):
        if not f.metadata.get(_WIRE, True):
            continue
        hint = hints[f.name]
        options = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        out[f.name] = np.ndarray if np.ndarray in options else options[0]
    return out


@dataclass(frozen=True)
class Request:
    """A task request. Subclasses set `task` and declare their settings as fields."""

    task: ClassVar[str]
    # What the request's arrays must look like ("n" = |U|, "m" = classes), checked on receipt.
    array_specs: ClassVar[Mapping[str, protocol.ArraySpec]] = {}

    @property
    def config(self) -> dict[str, protocol.Scalar]:
        """The scalar settings as they travel (see the module's wire rules)."""
        kinds = _wire_fields(type(self))
        out: dict[str, protocol.Scalar] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or kinds.get(f.name, np.ndarray) is np.ndarray:
                continue
            if f.metadata.get(_ALWAYS) or value != f.default:
                out[f.name] = value
        return out

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The named arrays as they travel."""
        kinds = _wire_fields(type(self))
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if kinds.get(f.name) is np.ndarray and getattr(self, f.name) is not None
        }

    def to_message(self) -> protocol.Message:
        return protocol.Message(self.task, self.config, self.arrays)

    @classmethod
    def from_message(cls, message: protocol.Message, context: Mapping[str, int]) -> Self:
        """The request a message carries; PayloadError for bad arrays, ValueError for settings
        this request does not have. `context` resolves the arrays' named dimensions."""
        if message.task != cls.task:
            raise ValueError(f"a {message.task!r} message is not a {cls.__name__} request")
        return cls.from_wire(message.config, cls.receive_arrays(message.arrays, context))

    @classmethod
    def receive_arrays(
        cls, arrays: Mapping[str, Any], context: Mapping[str, int]
    ) -> dict[str, np.ndarray]:
        return protocol.validate_arrays(
            arrays, cls.array_specs, context, client_id=None, task=cls.task, required=False
        )

    @classmethod
    def from_wire(
        cls, config: Mapping[str, protocol.Scalar], arrays: Mapping[str, np.ndarray]
    ) -> Self:
        kinds = _wire_fields(cls)
        scalars = {name for name, kind in kinds.items() if kind is not np.ndarray}
        unknown = sorted(set(config) - scalars)
        if unknown:
            raise ValueError(
                f"{cls.task} request ({cls.__name__}) has no setting(s) {', '.join(unknown)}; "
                f"it takes: {', '.join(sorted(scalars)) or 'none'}"
            )
        values: dict[str, Any] = {k: kinds[k](v) for k, v in config.items()}
        values.update({k: v for k, v in arrays.items() if k in kinds})
        for f in dataclasses.fields(cls):
            required = f.default is f.default_factory is dataclasses.MISSING
            if f.name in kinds and f.name not in values and required:
                raise ValueError(f"{cls.task} request carries no {f.name!r}")
        return cls(**values)


def as_message(request: Request | protocol.Message) -> protocol.Message:
    """The wire form engines deliver (a `Message` passes through)."""
    return request if isinstance(request, protocol.Message) else request.to_message()


# -- the protocol's requests ---------------------------------------------------------------
@dataclass(frozen=True)
class TrainLocal(Request):
    """Supervised epochs on the client's private data."""

    task: ClassVar[str] = protocol.TRAIN_LOCAL
    epochs: int = always_sent(1)


@dataclass(frozen=True)
class PredictPublic(Request):
    """Soft labels on U, sent in payload codec `codec` (core/codecs.py)."""

    task: ClassVar[str] = protocol.PREDICT_PUBLIC
    codec: str = "float32"


@dataclass(frozen=True)
class Distill(Request):
    """Fit the client's model on U to `targets` (optional per-sample `weights`) for `epochs`,
    with r_B weighted by `lam`; `client_weights` is how the client weights samples
    (`protocol.CLIENT_WEIGHTS`, None: uniform). `codec` encodes the targets on the wire."""

    task: ClassVar[str] = protocol.DISTILL
    array_specs: ClassVar[Mapping[str, protocol.ArraySpec]] = protocol.REQUEST_SPECS[
        protocol.DISTILL
    ]
    targets: np.ndarray
    weights: np.ndarray | None = None
    epochs: int = always_sent(1)
    lam: float = always_sent(0.0)
    client_weights: str | None = None
    codec: str = not_sent("float32")
    # The client's gate (handlers/gate.py): keep the step only if it does not lower accuracy
    # on the client's validation slice by more than `gate_margin`; `alternative` is a second
    # candidate teacher the gate may choose instead of `targets` (e.g. f̄_k beside h_k(U)).
    gate: bool = False
    gate_margin: float = 0.0
    alternative: np.ndarray | None = None

    @functools.cached_property
    def arrays(self) -> dict[str, np.ndarray]:  # type: ignore[override]
        # Cached: one request shared by a cluster's members is encoded once, not per message.
        if self.codec == "float32":  # the reference: the targets as they are
            return super().arrays
        codec = codecs.check_codec(self.codec)
        out = codecs.encode_probs(self.targets, codec, "targets")
        if self.alternative is not None:
            out.update(codecs.encode_probs(self.alternative, codec, "alternative"))
        return out if self.weights is None else {**out, "weights": self.weights}

    @classmethod
    def receive_arrays(
        cls, arrays: Mapping[str, Any], context: Mapping[str, int]
    ) -> dict[str, np.ndarray]:
        decoded = codecs.decode_arrays(arrays, context, client_id=None, task=cls.task)
        return super().receive_arrays(decoded, context)


@dataclass(frozen=True)
class Evaluate(Request):
    """Metrics of one of the client's models (`slot`) on its own `split` ("test" or
    "validation")."""

    task: ClassVar[str] = protocol.EVALUATE
    array_specs: ClassVar[Mapping[str, protocol.ArraySpec]] = protocol.REQUEST_SPECS[
        protocol.EVALUATE
    ]
    split: str = "test"
    slot: str = OWN_MODEL
    # A mix to deploy (COSMOS's opt-in `deploy_mix`): another model's probabilities on the
    # client's validation and test rows (h_π(i)'s, computed at the site from its weights).
    # The client picks α for α·own + (1 − α)·other on its validation rows and reports the
    # mix's metrics on `split` with the α chosen (handlers/gate.py `deployed_mix`).
    mix_validation: np.ndarray | None = None
    mix_test: np.ndarray | None = None


@dataclass(frozen=True)
class GetWeights(Request):
    """The parameters of the model in `slot` (parameter-sharing baselines only)."""

    task: ClassVar[str] = protocol.GET_WEIGHTS
    slot: str = OWN_MODEL


@dataclass(frozen=True)
class SetWeights(Request):
    """Load `weights` (named as `GetWeights` returns them) into the model in `slot`. The client
    checks them against its own model (names, shapes, float32, finite) before loading."""

    task: ClassVar[str] = protocol.SET_WEIGHTS
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)
    slot: str = OWN_MODEL

    @property
    def config(self) -> dict[str, protocol.Scalar]:
        return {"slot": self.slot} if self.slot != OWN_MODEL else {}

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        return dict(self.weights)

    @classmethod
    def receive_arrays(
        cls, arrays: Mapping[str, Any], context: Mapping[str, int]
    ) -> dict[str, np.ndarray]:
        return dict(arrays)  # checked against the receiving model by the handler

    @classmethod
    def from_wire(
        cls, config: Mapping[str, protocol.Scalar], arrays: Mapping[str, np.ndarray]
    ) -> Self:
        unknown = sorted(set(config) - {"slot"})
        if unknown:
            raise ValueError(f"{cls.task} request has no setting(s) {', '.join(unknown)}")
        return cls(weights=dict(arrays), slot=str(config.get("slot", OWN_MODEL)))


# -- replies ----------------------------------------------------------------------------------
class TaskReply:
    """What a client handler answers; `to_reply` gives the wire form."""

    def to_reply(self, task: str) -> protocol.Reply:
        raise NotImplementedError


@dataclass(frozen=True)
class MetricsReply(TaskReply):
    """Scalar metrics only (training losses, accuracy)."""

    metrics: Mapping[str, float] = field(default_factory=dict)

    def to_reply(self, task: str) -> protocol.Reply:
        return protocol.Reply(task, metrics=dict(self.metrics))


@dataclass(frozen=True)
class ProbsReply(TaskReply):
    """Soft labels on U, (n, m) rows on the simplex, sent in payload codec `codec`."""

    probs: np.ndarray
    codec: str = "float32"

    def to_reply(self, task: str) -> protocol.Reply:
        return protocol.Reply(
            task, arrays=codecs.encode_probs(self.probs, codecs.check_codec(self.codec))
        )


@dataclass(frozen=True)
class LabelsReply(TaskReply):
    """Hard labels on U, (n,) in the smallest integer type that holds the classes."""

    labels: np.ndarray

    def to_reply(self, task: str) -> protocol.Reply:
        return protocol.Reply(task, arrays={"labels": self.labels})


@dataclass(frozen=True)
class WeightsReply(TaskReply):
    """A model's parameters (float32, named as in its state_dict) and the client's number of
    training samples (FedAvg's weight n_i)."""

    weights: Mapping[str, np.ndarray]
    num_samples: float = 1.0

    def to_reply(self, task: str) -> protocol.Reply:
        metrics = {"num_samples": float(self.num_samples)}
        return protocol.Reply(task, arrays=dict(self.weights), metrics=metrics)

    @classmethod
    def from_reply(cls, reply: protocol.Reply) -> WeightsReply:
        """Read a validated get_weights reply on the server."""
        weights = {name: np.asarray(a) for name, a in reply.arrays.items()}
        return cls(weights, float(reply.metrics.get("num_samples", 1.0)))
