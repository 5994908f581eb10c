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

from cosmosfl.core import protocol as P

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


Item = P.Message | ServerEval


@dataclass(frozen=True)
class ItemReply:
    """One item's outcome: a protocol reply, or the metrics of a server-model evaluation."""

    kind: str
    reply: P.Reply
    seconds: float = 0.0


@dataclass
class Batch:
    items: list[Item] = field(default_factory=list)
    round_num: int = 0


def _array_record(arrays: Mapping[str, np.ndarray]) -> ArrayRecord:
    record = ArrayRecord()
    for name, value in arrays.items():
        record[name] = Array(np.ascontiguousarray(value))
    return record


def _arrays(record: ArrayRecord | None) -> dict[str, np.ndarray]:
    return {} if record is None else {name: arr.numpy() for name, arr in record.items()}


def encode_batch(batch: Batch) -> RecordDict:
    content = RecordDict()
    content[BATCH] = ConfigRecord({"size": len(batch.items), "round": batch.round_num})
    for i, item in enumerate(batch.items):
        if isinstance(item, ServerEval):
            content[f"{i}.head"] = ConfigRecord({"kind": SERVER_EVAL, "task": P.EVALUATE})
            content[f"{i}.config"] = ConfigRecord(dict(item.spec))
        else:
            content[f"{i}.head"] = ConfigRecord({"kind": PROTOCOL, "task": item.task})
            content[f"{i}.config"] = ConfigRecord(dict(item.config))
        if item.arrays:
            content[f"{i}.arrays"] = _array_record(item.arrays)
    return content


def decode_batch(content: RecordDict) -> Batch:
    head = content.config_records[BATCH]
    batch = Batch(round_num=int(head["round"]))
    for i in range(int(head["size"])):
        kind = content.config_records[f"{i}.head"]["kind"]
        config = dict(content.config_records[f"{i}.config"])
        arrays = _arrays(content.array_records.get(f"{i}.arrays"))
        if kind == SERVER_EVAL:
            batch.items.append(ServerEval(config, arrays))
        elif kind == PROTOCOL:
            task = str(content.config_records[f"{i}.head"]["task"])
            batch.items.append(P.Message(task, config, arrays))
        else:
            raise ValueError(f"unknown batch item kind {kind!r}")
    return batch


def encode_replies(partition_id: int, replies: list[ItemReply]) -> RecordDict:
    content = RecordDict()
    content[CLIENT] = ConfigRecord({"partition-id": int(partition_id), "size": len(replies)})
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
    """(the partition id the client reports, its item replies in order)."""
    head = content.config_records[CLIENT]
    out = []
    for i in range(int(head["size"])):
        h = content.config_records[f"{i}.head"]
        reply = P.Reply(
            str(h["task"]),
            arrays=_arrays(content.array_records.get(f"{i}.arrays")),
            metrics=dict(content.metric_records.get(f"{i}.metrics", {})),
            error=h.get("error"),  # type: ignore[arg-type]
            error_kind=h.get("error_kind"),  # type: ignore[arg-type]
            traceback=h.get("traceback"),  # type: ignore[arg-type]
        )
        out.append(ItemReply(str(h["kind"]), reply, float(h.get("seconds", 0.0))))
    return int(head["partition-id"]), out
