"""Payload codecs for soft labels: how probability matrices travel, and how they are checked.

A codec turns a probability matrix (n, M) into one or more arrays that cross the wire, and
back. The sender encodes; the receiver decodes and validates the *encoded* arrays before it
decodes them (a corrupt payload is a PayloadError, never a crash or a silent fix), so byte
counts are of what really travels. Encoded arrays carry their codec in their name
(`probs.uint8`, `probs.top_idx` + `probs.top_val`), so a message needs no side channel and a
float32 or float16 payload stays a plain `probs` array.

    float32  reference, 4 bytes per value
    float16  2 bytes per value (rows still sum to 1 within protocol.SIMPLEX_ATOL)
    uint8    1 byte per value: rows quantised to integers summing to exactly 255
    top<k>   the k largest probabilities per row (float16) and their classes (uint8/uint16);
             the rest of the row's mass is spread evenly over the other M - k classes
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from cosmosfl.core import protocol

CODECS = ("float32", "float16", "uint8", "top<k>")
QUANT_LEVELS = 255
_TOP = re.compile(r"^top(\d+)$")
_SUFFIXES = (".uint8", ".top_idx", ".top_val")


def check_codec(name: str) -> str:
    """Return `name` if it is a codec, else a ValueError naming the allowed ones."""
    if name in ("float32", "float16", "uint8"):
        return name
    match = _TOP.match(str(name))
    if match and int(match.group(1)) >= 1:
        return name
    raise ValueError(
        f"codec {name!r} is not supported; allowed: float32, float16, uint8, top<k> "
        "(e.g. top2: the 2 largest probabilities per row)"
    )


def encode_probs(probs: np.ndarray, codec: str, name: str = "probs") -> dict[str, np.ndarray]:
    """The arrays that carry probability matrix `probs` under `codec`."""
    check_codec(codec)
    p = np.asarray(probs, dtype=np.float32)
    if codec == "float32":
        return {name: p}
    if codec == "float16":
        return {name: p.astype(np.float16)}
    if codec == "uint8":
        return {f"{name}.uint8": quantize_rows(p)}
    k = min(int(codec[3:]), p.shape[1])
    # Stable sort: equal probabilities keep class order, so encoding is deterministic.
    idx = np.argsort(-p, axis=1, kind="stable")[:, :k]
    val = np.take_along_axis(p, idx, axis=1).astype(np.float16)
    return {
        f"{name}.top_idx": idx.astype(protocol.label_dtype(p.shape[1])),
        f"{name}.top_val": val,
    }


def quantize_rows(p: np.ndarray) -> np.ndarray:
    """Rows as uint8 counts summing to exactly 255 (largest-remainder rounding), so a decoded
    row sums to 1 and the receiver can verify every row."""
    scaled = np.clip(np.asarray(p, dtype=np.float64), 0, None) * QUANT_LEVELS
    scaled *= QUANT_LEVELS / np.maximum(scaled.sum(axis=1, keepdims=True), 1e-12)
    q = np.floor(scaled)
    short = (QUANT_LEVELS - q.sum(axis=1)).astype(np.int64)
    order = np.argsort(-(scaled - q), axis=1, kind="stable")
    ranks = np.argsort(order, axis=1, kind="stable")
    q += ranks < short[:, None]
    return q.astype(np.uint8)


def is_encoded(arrays: Mapping[str, Any]) -> bool:
    return isinstance(arrays, Mapping) and any(
        isinstance(key, str) and key.endswith(_SUFFIXES) for key in arrays
    )


def _encoding_base(key: str) -> tuple[str, str]:
    """(the matrix a part belongs to, its encoding); top_idx and top_val are one encoding."""
    for suffix, encoding in ((".uint8", "uint8"), (".top_idx", "top"), (".top_val", "top")):
        if key.endswith(suffix):
            return key[: -len(suffix)], encoding
    return key, "plain"


def decode_arrays(
    arrays: Mapping[str, Any],
    context: Mapping[str, int],
    *,
    client_id: int | None,
    task: str,
) -> dict[str, Any]:
    """Decode every encoded probability matrix in `arrays` (others pass through unchanged).

    Raises PayloadError when an encoded part is malformed: wrong dtype or shape, class indices
    out of range or repeated, negative or non-finite values, rows that do not add up.
    """
    odd = [key for key in arrays if not isinstance(key, str)]
    if odd:
        raise protocol.PayloadError(client_id, task, f"array names must be strings, got {odd!r}")
    n, m = context["n"], context["m"]

    def fail(name: str, reason: str) -> protocol.PayloadError:
        return protocol.PayloadError(client_id, task, f"array {name!r}: {reason}")

    # One matrix in two encodings (`probs` and `probs.uint8`) would decode to whichever came
    # last: a silent choice between two payloads, so it is refused.
    encodings: dict[str, set[str]] = {}
    for key in arrays:
        base, encoding = _encoding_base(key)
        encodings.setdefault(base, set()).add(encoding)
    for base, found in encodings.items():
        if len(found) > 1:
            raise fail(base, f"arrives in more than one encoding ({', '.join(sorted(found))})")
    out = {k: v for k, v in arrays.items() if not k.endswith(_SUFFIXES)}

    for key, value in arrays.items():
        if key.endswith(".uint8"):
            base = key[: -len(".uint8")]
            q = _checked(key, value, np.uint8, (n, m), fail)
            sums = q.sum(axis=1, dtype=np.int64)
            if (sums != QUANT_LEVELS).any():
                bad = int(np.flatnonzero(sums != QUANT_LEVELS)[0])
                raise fail(key, f"row {bad} sums to {int(sums[bad])}, not {QUANT_LEVELS}")
            out[base] = q.astype(np.float32) / QUANT_LEVELS
        elif key.endswith(".top_idx"):
            base = key[: -len(".top_idx")]
            if f"{base}.top_val" not in arrays:
                raise fail(key, f"comes without its values {base + '.top_val'!r}")
            out[base] = _decode_top(
                key, value, f"{base}.top_val", arrays[f"{base}.top_val"], n, m, fail
            )
        elif key.endswith(".top_val") and f"{key[: -len('.top_val')]}.top_idx" not in arrays:
            raise fail(key, "comes without its class indices")
    return out


def _checked(name: str, value: Any, dtype: Any, shape: tuple[int | None, ...], fail: Any):
    if not isinstance(value, np.ndarray):
        raise fail(name, f"expected a numpy array, got {type(value).__name__}")
    if dtype is not None and value.dtype != np.dtype(dtype):
        raise fail(name, f"dtype {value.dtype} is not {np.dtype(dtype)}")
    if value.ndim != len(shape) or any(
        e is not None and e != s for e, s in zip(shape, value.shape, strict=True)
    ):
        raise fail(name, f"shape {value.shape} does not match expected {shape}")
    return value


def _decode_top(
    idx_name: str, idx: Any, val_name: str, val: Any, n: int, m: int, fail: Any
) -> np.ndarray:
    idx = _checked(idx_name, idx, None, (n, None), fail)
    if not np.issubdtype(idx.dtype, np.integer):
        raise fail(idx_name, f"dtype {idx.dtype} is not an integer type")
    k = idx.shape[1]
    if not 1 <= k <= m:
        raise fail(idx_name, f"k = {k} must lie in [1, {m}]")
    val = _checked(val_name, val, np.float16, (n, k), fail)
    if idx.min() < 0 or idx.max() >= m:
        raise fail(idx_name, f"class indices must lie in [0, {m}), got [{idx.min()}, {idx.max()}]")
    if (np.diff(np.sort(idx, axis=1), axis=1) == 0).any():
        raise fail(idx_name, "a row names the same class twice")
    v = val.astype(np.float64)
    if not np.isfinite(v).all() or (v < 0).any():
        raise fail(val_name, "values must be finite and >= 0")
    kept = v.sum(axis=1)
    if (kept > 1.0 + protocol.SIMPLEX_ATOL).any():
        raise fail(val_name, f"a row's values sum to {kept.max():.4g} > 1")
    out = np.zeros((n, m), dtype=np.float64)
    if k < m:
        out += (np.clip(1.0 - kept, 0.0, None) / (m - k))[:, None]
    np.put_along_axis(out, idx.astype(np.int64), v, axis=1)
    out /= out.sum(axis=1, keepdims=True).clip(min=1e-12)  # float16 rounding only
    return out.astype(np.float32)


def decode_reply(reply: Any, context: Mapping[str, int], *, client_id: int, task: str) -> Any:
    """A Reply with its encoded arrays decoded; anything else is returned for validation."""
    if (
        not isinstance(reply, protocol.Reply)
        or reply.error is not None
        or not is_encoded(reply.arrays)
    ):
        return reply
    arrays = decode_arrays(reply.arrays, context, client_id=client_id, task=task)
    return replace(reply, arrays=arrays)


def receive_reply(
    reply: Any,
    spec: Mapping[str, protocol.ArraySpec],
    context: Mapping[str, int],
    *,
    client_id: int,
    task: str,
    max_bytes: int,
) -> protocol.Reply:
    """What every engine does with a reply on receipt: decode its encoded arrays (bytes were
    counted encoded, before this), then validate the decoded payload; PayloadError if bad."""
    decoded = decode_reply(reply, context, client_id=client_id, task=task)
    return protocol.validate_reply(
        decoded, spec, context, client_id=client_id, task=task, max_bytes=max_bytes
    )
