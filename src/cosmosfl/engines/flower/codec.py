"""Protocol messages <-> Flower records.

One Flower message carries a *batch* of items for one client, executed in order: protocol
messages (`core.protocol.Message`) and, separately, evaluation-only requests that carry a
server model to be measured on the client's test split. Item i lives in records named
`"{i}.head"` (kind, task; on replies also error fields), `"{i}.config"` / `"{i}.metrics"` and
`"{i}.arrays"`, so every array keeps its protocol name and dtype on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from cosmosfl.core import protocol

MESSAGE_TYPE = "query.cosmosfl"
ACTION = "cosmosfl"
PROTOCOL = "protocol"
SERVER_EVAL = "server_eval"
BATCH = "batch"
CLIENT = "client"


@dataclass(frozen=True)
class ServerEval:
    """Evaluate a server model (rebuilt from `spec` + `arrays`) on the client's test split, or
    on the split `spec["split"]` names ("validation", for model selection).

    A measurement for reporting (h_π(i) on client i's test data), not a protocol task: its
    bytes are counted apart from the protocol's.
    """

    spec: Mapping[str, Any]
    arrays: Mapping[str, np.ndarray]


Item = protocol.Message | ServerEval


@dataclass(frozen=True)
class ItemReply:
    """One item's outcome: a protocol reply, or the metrics of a server-model evaluation."""

    kind: str
    reply: protocol.Reply
    seconds: float = 0.0


@dataclass
class Batch:
    items: list[Item] = field(default_factory=list)
    round_num: int = 0


class RecordError(ValueError):
    """A Flower message's records are not a well-formed batch or reply: a record or field is
    missing or of the wrong type, or an array's bytes do not decode. The whole message is
    refused (the server records the sender's items as rejected with this reason)."""


_REQUIRED = object()


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _config(content: RecordDict, name: str) -> ConfigRecord:
    record = content.config_records.get(name)
    if record is None:
        raise RecordError(f"config record {name!r} is missing")
    return record


def _field(record: ConfigRecord, where: str, key: str, kind: type, default: Any = _REQUIRED) -> Any:
    """`record[key]` if it has type `kind` (bool is not an int, an int is a float)."""
    if key not in record:
        if default is _REQUIRED:
            raise RecordError(f"{where}[{key!r}] is missing")
        return default
    value = record[key]
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        raise RecordError(f"{where}[{key!r}] = {_short(value)} must be {kind.__name__}")
    return value


def _count(record: ConfigRecord, where: str, key: str) -> int:
    value = _field(record, where, key, int)
    if value < 0:
        raise RecordError(f"{where}[{key!r}] = {value} must be >= 0")
    return value


def _array_record(arrays: Mapping[str, np.ndarray]) -> ArrayRecord:
    record = ArrayRecord()
    for name, value in arrays.items():
        record[name] = Array(np.ascontiguousarray(value))
    return record


def _arrays(record: ArrayRecord | None, where: str) -> dict[str, np.ndarray]:
    if record is None:
        return {}
    out = {}
    for name, arr in record.items():
        try:
            # Hostile bytes meet numpy's .npy parser here (Flower loads with
            # allow_pickle=False, so object arrays are refused, never unpickled); whatever it
            # raises (ValueError, EOFError, MemoryError for a huge declared shape, ...) means
            # the same to us: the array does not decode.
            value = arr.numpy()
        except Exception as exc:
            raise RecordError(
                f"{where}[{name!r}] does not decode: {type(exc).__name__}: {_short(str(exc))}"
            ) from None
        if not isinstance(value, np.ndarray):
            raise RecordError(f"{where}[{name!r}] holds a {type(value).__name__}, not one array")
        if str(value.dtype) != arr.dtype or tuple(value.shape) != tuple(arr.shape):
            raise RecordError(
                f"{where}[{name!r}] declares {arr.dtype} {tuple(arr.shape)} but holds "
                f"{value.dtype} {value.shape}"
            )
        out[name] = value
    return out


def encode_batch(batch: Batch) -> RecordDict:
    content = RecordDict()
    content[BATCH] = ConfigRecord({"size": len(batch.items), "round": batch.round_num})
    for i, item in enumerate(batch.items):
        if isinstance(item, ServerEval):
            content[f"{i}.head"] = ConfigRecord({"kind": SERVER_EVAL, "task": protocol.EVALUATE})
            content[f"{i}.config"] = ConfigRecord(dict(item.spec))
        else:
            content[f"{i}.head"] = ConfigRecord({"kind": PROTOCOL, "task": item.task})
            content[f"{i}.config"] = ConfigRecord(dict(item.config))
        if item.arrays:
            content[f"{i}.arrays"] = _array_record(item.arrays)
    return content


def decode_batch(content: RecordDict) -> Batch:
    """The batch a server sent; RecordError if its records are malformed."""
    head = _config(content, BATCH)
    batch = Batch(round_num=_field(head, BATCH, "round", int))
    for i in range(_count(head, BATCH, "size")):
        item_head = _config(content, f"{i}.head")
        kind = _field(item_head, f"{i}.head", "kind", str)
        config = dict(_config(content, f"{i}.config"))
        arrays = _arrays(content.array_records.get(f"{i}.arrays"), f"{i}.arrays")
        if kind == SERVER_EVAL:
            batch.items.append(ServerEval(config, arrays))
        elif kind == PROTOCOL:
            task = _field(item_head, f"{i}.head", "task", str)
            try:
                batch.items.append(protocol.Message(task, config, arrays))
            except (TypeError, ValueError) as err:
                raise RecordError(f"item {i}: {err}") from None
        else:
            raise RecordError(f"unknown batch item kind {_short(kind)}")
    return batch


HELLO = "hello"
HELLO_KEYS = ("model", "refused")  # what a site says at discovery: its model, or why it won't join


def encode_replies(
    partition_id: int, replies: list[ItemReply], hello: Mapping[str, str] | None = None
) -> RecordDict:
    """A client's replies; `hello` (discovery only): the site's model name, or `refused` with
    the reason it cannot join (a different U, labels outside the run's set, ...)."""
    content = RecordDict()
    content[CLIENT] = ConfigRecord({"partition-id": int(partition_id), "size": len(replies)})
    if hello:
        content[HELLO] = ConfigRecord({k: str(v) for k, v in hello.items() if k in HELLO_KEYS})
    for i, item in enumerate(replies):
        r = item.reply
        head: dict[str, Any] = {"kind": item.kind, "task": r.task, "seconds": float(item.seconds)}
        for key in ("error", "error_kind", "traceback"):
            if getattr(r, key) is not None:
                head[key] = str(getattr(r, key))
        content[f"{i}.head"] = ConfigRecord(head)
        content[f"{i}.metrics"] = MetricRecord({k: float(v) for k, v in r.metrics.items()})
        if r.arrays:
            content[f"{i}.arrays"] = _array_record(r.arrays)
    return content


def decode_replies(content: RecordDict) -> tuple[int, list[ItemReply]]:
    """(the partition id the client reports, its item replies in order); RecordError if the
    records are malformed. The replies' arrays and metrics are not validated here: that is
    the protocol's job (core/codecs.receive_reply), as for the in-process engine."""
    head = _config(content, CLIENT)
    partition = _count(head, CLIENT, "partition-id")
    out = []
    for i in range(_count(head, CLIENT, "size")):
        where = f"{i}.head"
        h = _config(content, where)
        kind = _field(h, where, "kind", str)
        if kind not in (PROTOCOL, SERVER_EVAL):
            raise RecordError(
                f"{where}['kind'] = {_short(kind)} is not {PROTOCOL} or {SERVER_EVAL}"
            )
        seconds = _field(h, where, "seconds", float, 0.0)
        if not protocol.is_finite_number(seconds) or seconds < 0:
            raise RecordError(f"{where}['seconds'] = {_short(seconds)} must be finite and >= 0")
        reply = protocol.Reply(
            _field(h, where, "task", str),
            arrays=_arrays(content.array_records.get(f"{i}.arrays"), f"{i}.arrays"),
            metrics=dict(content.metric_records.get(f"{i}.metrics", {})),
            error=_field(h, where, "error", str, None),
            error_kind=_field(h, where, "error_kind", str, None),
            traceback=_field(h, where, "traceback", str, None),
        )
        out.append(ItemReply(kind, reply, float(seconds)))
    return partition, out


def decode_hello(content: RecordDict) -> dict[str, str]:
    """What a discovery reply says of the site (`model`, `refused`); {} when nothing."""
    if HELLO not in content.config_records:
        return {}
    record = content.config_records[HELLO]
    return {k: record[k][:2000] for k in HELLO_KEYS if isinstance(record.get(k), str)}
