"""The client/server message protocol: typed messages, payload validation and byte accounting.

Every algorithm talks to clients only through these messages, so the same algorithm runs on
any engine, and every array that crosses the boundary is checked here before it is used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Client tasks. Parameter tasks exist for parameter-sharing baselines only; model-agnostic
# algorithms (COSMOS, local, ...) must never send them (see `PARAMETER_TASKS`).
TRAIN_LOCAL = "train_local"
PREDICT_PUBLIC = "predict_public"
DISTILL = "distill"
EVALUATE = "evaluate"
GET_WEIGHTS = "get_weights"
SET_WEIGHTS = "set_weights"
TASKS = (TRAIN_LOCAL, PREDICT_PUBLIC, DISTILL, EVALUATE, GET_WEIGHTS, SET_WEIGHTS)
PARAMETER_TASKS = frozenset({GET_WEIGHTS, SET_WEIGHTS})

Scalar = bool | int | float | str

# How a client weights the distillation samples of a `distill` request (its config key
# "client_weights"): w_i(x) = 1, or importance weights from the client's label prior.
CLIENT_WEIGHTS = ("uniform", "label-prior")

# Probability rows must sum to 1 within this tolerance; float16 codecs need the slack.
SIMPLEX_ATOL = 1e-3
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 30


class PayloadError(ValueError):
    """A received array failed validation; the sender is excluded from the step."""

    def __init__(self, client_id: int | None, task: str, reason: str) -> None:
        who = "server" if client_id is None else f"client {client_id}"
        super().__init__(f"rejected payload from {who} for task {task!r}: {reason}")
        self.client_id = client_id
        self.task = task
        self.reason = reason


@dataclass(frozen=True)
class Message:
    """A request from the server to one client: a task, scalar settings and named arrays."""

    task: str
    config: Mapping[str, Scalar] = field(default_factory=dict)
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; allowed: {', '.join(TASKS)}")
        for key, value in self.config.items():
            if not isinstance(value, Scalar):
                raise TypeError(f"config[{key!r}] must be a scalar, got {type(value).__name__}")


@dataclass(frozen=True)
class Reply:
    """A client's answer: arrays (e.g. soft labels), scalar metrics, or an error text."""

    task: str
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    # "payload": the client refused what it received; "exception": its code raised.
    error_kind: str | None = None
    traceback: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def payload_bytes(arrays: Mapping[str, np.ndarray]) -> int:
    """Bytes of array payload as sent: the measured communication cost of a message.

    Counted before validation, so it must not fail on what a faulty client sends: a value
    numpy cannot make an array of (a ragged list) counts 0, and so does a non-mapping."""
    if not isinstance(arrays, Mapping):
        return 0
    return int(sum(_nbytes(a) for a in arrays.values()))


def _nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return value.nbytes
    try:
        return np.asarray(value).nbytes
    except (ValueError, TypeError, OverflowError):
        return 0


def message_bytes(message: Message | Reply) -> int:
    return payload_bytes(message.arrays)


@dataclass(frozen=True)
class ArraySpec:
    """What a named array in a message must look like.

    `shape` entries are ints or names resolved from a context (e.g. "n" = |U|, "m" = classes);
    None means any size; `shape=None` accepts any number of dimensions (model weights whose
    shapes the server learns from the first reply). `kind` is "probs" (finite, non-negative
    rows summing to 1), "labels" (integers in [0, m)), "weights" (finite, non-negative) or
    "any" (finite floats).
    """

    shape: tuple[int | str | None, ...] | None
    kind: str = "any"
    dtypes: tuple[str, ...] = ("float32", "float64", "float16")


PROBS = ArraySpec(("n", "m"), kind="probs")
# Hard labels on U (FedCT): the smallest integer type that holds M classes travels.
LABELS = ArraySpec(("n",), kind="labels")
HARD_LABELS_REPLY = {"labels": LABELS}

# In a spec mapping, this key validates every array whose name the mapping does not list:
# parameter replies carry one array per model tensor, named by the client's state_dict.
ANY_NAME = "*"


def label_dtype(num_classes: int) -> np.dtype:
    """The smallest unsigned integer type for class labels in [0, num_classes)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if num_classes - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


# What each task's reply must carry. Algorithms may add expectations per call.
REPLY_SPECS: dict[str, dict[str, ArraySpec]] = {
    TRAIN_LOCAL: {},
    PREDICT_PUBLIC: {"probs": PROBS},
    DISTILL: {},
    EVALUATE: {},
    GET_WEIGHTS: {},
    SET_WEIGHTS: {},
}

# What each request may carry, checked by the client before it trains on anything.
REQUEST_SPECS: dict[str, dict[str, ArraySpec]] = {
    # Optional: U labelled by the server, trained on together with the private data (FedCT).
    TRAIN_LOCAL: {"public_labels": LABELS},
    DISTILL: {
        "targets": PROBS,
        "weights": ArraySpec(("n",), kind="weights"),
        "alternative": PROBS,  # a second candidate teacher for the client's gate
    },
    # Another model's probabilities on the client's own rows, to mix with its own (deploy_mix).
    EVALUATE: {
        "mix_validation": ArraySpec((None, "m"), kind="probs"),
        "mix_test": ArraySpec((None, "m"), kind="probs"),
    },
}


def _resolve(dim: int | str | None, context: Mapping[str, int]) -> int | None:
    if dim is None or isinstance(dim, int):
        return dim
    return context[dim]


def validate_array(
    name: str,
    array: Any,
    spec: ArraySpec,
    context: Mapping[str, int],
    *,
    client_id: int | None,
    task: str,
    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> np.ndarray:
    """Return `array` if it satisfies `spec`, else raise PayloadError naming the fault."""

    def fail(reason: str) -> PayloadError:
        return PayloadError(client_id, task, f"array {name!r}: {reason}")

    if not isinstance(array, np.ndarray):
        raise fail(f"expected a numpy array, got {type(array).__name__}")
    if array.nbytes > max_bytes:
        raise fail(f"{array.nbytes} bytes exceeds the limit of {max_bytes}")
    if spec.kind == "labels":
        if not np.issubdtype(array.dtype, np.integer):
            raise fail(f"dtype {array.dtype} is not an integer type")
    elif str(array.dtype) not in spec.dtypes:
        raise fail(f"dtype {array.dtype} not allowed (allowed: {', '.join(spec.dtypes)})")
    if array.size == 0:
        raise fail(f"array is empty (shape {array.shape})")
    expected = (
        tuple(_resolve(d, context) for d in spec.shape)
        if spec.shape is not None
        else (None,) * array.ndim
    )
    shown = tuple("*" if e is None else e for e in expected)
    if (
        array.ndim == len(expected)
        and expected
        and expected[0] is not None
        and array.shape[0] < expected[0]
        and all(e is None or e == s for e, s in zip(expected[1:], array.shape[1:], strict=True))
    ):
        raise fail(f"truncated: {array.shape[0]} of {expected[0]} rows (shape {shown})")
    if array.ndim != len(expected) or any(
        e is not None and e != s for e, s in zip(expected, array.shape, strict=True)
    ):
        raise fail(f"shape {array.shape} does not match expected {shown}")
    if spec.kind == "labels":
        m = context["m"]
        if array.min() < 0 or array.max() >= m:
            raise fail(f"label values must lie in [0, {m}), got [{array.min()}, {array.max()}]")
        return array
    values = array.astype(np.float64, copy=False)
    if not np.isfinite(values).all():
        raise fail(f"{int((~np.isfinite(values)).sum())} non-finite values (NaN or inf)")
    if spec.kind in ("probs", "weights") and (values < 0).any():
        raise fail(f"{int((values < 0).sum())} negative values")
    if spec.kind == "probs":
        sums = values.sum(axis=-1)
        worst = float(np.abs(sums - 1.0).max())
        if worst > SIMPLEX_ATOL:
            raise fail(
                f"rows must sum to 1 (worst row sums to {1.0 + worst:.4g} or off by {worst:.3g})"
            )
    return array


def validate_arrays(
    arrays: Mapping[str, Any],
    specs: Mapping[str, ArraySpec],
    context: Mapping[str, int],
    *,
    client_id: int | None,
    task: str,
    required: bool = True,
    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> dict[str, np.ndarray]:
    """Validate every array named in `specs`; unexpected names are rejected too.

    A spec under `ANY_NAME` validates every array not named otherwise (nothing is unexpected).
    """
    if not isinstance(arrays, Mapping):
        raise PayloadError(
            client_id, task, f"arrays must be a mapping, got {type(arrays).__name__}"
        )
    odd = [name for name in arrays if not isinstance(name, str)]
    if odd:
        raise PayloadError(client_id, task, f"array names must be strings, got {odd!r}")
    wildcard = specs.get(ANY_NAME)
    specs = {k: v for k, v in specs.items() if k != ANY_NAME}
    if wildcard is not None:
        specs.update({name: wildcard for name in arrays if name not in specs})
    unexpected = sorted(set(arrays) - set(specs))
    if unexpected:
        raise PayloadError(client_id, task, f"unexpected arrays {unexpected}")
    if required:
        missing = sorted(set(specs) - set(arrays))
        if missing:
            raise PayloadError(client_id, task, f"missing arrays {missing}")
    total = payload_bytes({k: v for k, v in arrays.items() if isinstance(v, np.ndarray)})
    if total > max_bytes:
        raise PayloadError(client_id, task, f"payload of {total} bytes exceeds {max_bytes}")
    return {
        name: validate_array(
            name,
            arrays[name],
            specs[name],
            context,
            client_id=client_id,
            task=task,
            max_bytes=max_bytes,
        )
        for name in specs
        if name in arrays
    }


def validate_reply(
    reply: Reply,
    expected: Mapping[str, ArraySpec],
    context: Mapping[str, int],
    *,
    client_id: int,
    task: str,
    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Reply:
    """Check a reply from `client_id`: its task, error state, arrays and metrics."""
    if not isinstance(reply, Reply):
        raise PayloadError(client_id, task, f"expected a Reply, got {type(reply).__name__}")
    # Compared as a str only: `!=` on an arbitrary object (a numpy array) may itself raise.
    if not isinstance(reply.task, str) or reply.task != task:
        raise PayloadError(client_id, task, f"reply is for task {reply.task!r}")
    if reply.error is not None:
        raise PayloadError(client_id, task, f"client reported an error: {reply.error}")
    validate_arrays(
        reply.arrays, expected, context, client_id=client_id, task=task, max_bytes=max_bytes
    )
    if not isinstance(reply.metrics, Mapping):
        raise PayloadError(
            client_id, task, f"metrics must be a mapping, got {type(reply.metrics).__name__}"
        )
    for key, value in reply.metrics.items():
        if not isinstance(key, str):
            raise PayloadError(client_id, task, f"metric names must be strings, got {key!r}")
        if not is_finite_number(value):
            raise PayloadError(client_id, task, f"metric {key!r} is not a finite number: {value!r}")
    return reply


def is_finite_number(value: Any) -> bool:
    """A Python int or float that is finite as a float (an int beyond float range is not)."""
    if not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


# Model parameters (get_weights / set_weights) travel as float32, one array per tensor.
WEIGHT_DTYPES = ("float32",)
WEIGHTS_ANY = {ANY_NAME: ArraySpec(None, kind="any", dtypes=WEIGHT_DTYPES)}


def weights_spec(template: Mapping[str, np.ndarray]) -> dict[str, ArraySpec]:
    """Exact spec for a weights payload: the names and shapes of `template`, float32, finite."""
    return {
        name: ArraySpec(tuple(int(d) for d in np.shape(a)), kind="any", dtypes=WEIGHT_DTYPES)
        for name, a in template.items()
    }
