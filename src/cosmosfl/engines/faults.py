"""Seeded fault injection for both engines: drop-outs, stragglers, crashes, corrupted payloads
and Byzantine clients.

The injector is stateless: every decision is a pure function of (seed, round, client, task), so a
rerun or a resumed run sees exactly the same faults. Per round, one uniform draw per client picks
its fault by intervals [0, dropout), [dropout, dropout + straggler), ... so that two configs with
the same total fraction hit the same clients: `corrupt: 0.1` and `dropout: 0.1` fault the same
clients in the same rounds. A faulted client fails every task in `tasks` for that round.

Evaluation (`evaluate`) is never faulted: it is the experimenter's measurement, not a protocol
step, so accuracies are always reported over every client.

What each fault does to the client (each engine applies it in its `send`, on the server side:
the in-process engine in engines/simulation.py, the Flower engine in engines/flower/, so both
give the same records for the same seed):
- dropout: the client is offline; it is never asked, does no work, and nothing is received.
- straggler: the client does the work (its model changes), but the reply arrives after the
  round's deadline and is discarded, like a reply that failed validation.
- crash: the client's code raises at the start of the task (no work done); the server records
  the failure and excludes the client even in a strict run (it is a fault, not a bug).
- corrupt: the client does the work and sends a payload of the configured corruption class;
  validation rejects it. Only replies that carry arrays can be corrupted.
- byzantine: a fixed, seeded subset of clients answers `predict_public` with hostile but valid
  payloads in every round: random soft labels, its own predictions with the classes reversed
  (a systematic label flip), or one fixed class for everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cosmosfl.core import protocol
from cosmosfl.core.constraints import Custom, Interval, Options, Rule, check_instance
from cosmosfl.core.seeds import derive_seed

FAULT_MODES = ("dropout", "straggler", "crash", "corrupt")
CORRUPTIONS = (
    "nan",
    "inf",
    "negative",
    "non_simplex",
    "wrong_shape",
    "wrong_dtype",
    "label_range",
    "empty",
    "truncated",
    "oversized",
    "not_an_array",
)
BYZANTINE_MODES = ("random", "flip", "fixed")
FAULTABLE_TASKS = tuple(t for t in protocol.TASKS if t != protocol.EVALUATE)


# A fraction of the clients; its message reads "faults.dropout = 1.5 must be a fraction in [0, 1]".
FRACTION = Interval(float, 0, 1, noun="a fraction", message="{key} = {value!r} must be {allowed}")
_NAMES = "{key} = {value!r}; {hint}"  # "faults.corruption = 'x'; allowed: random, nan, ..."


class InjectedCrash(RuntimeError):
    """The exception a crashing client raises (a simulated fault, never a bug)."""


@dataclass
class FaultConfig:
    """Fractions of clients hit per round by each fault, and Byzantine clients (all seeded)."""

    dropout: float = 0.0
    straggler: float = 0.0
    crash: float = 0.0
    corrupt: float = 0.0
    # One of CORRUPTIONS, or "random": a class drawn per (round, client).
    corruption: str = "random"
    # Tasks a faulted client fails in its round (default: every protocol task but evaluate).
    tasks: list[str] = field(default_factory=lambda: list(FAULTABLE_TASKS))
    byzantine: float = 0.0  # fraction of clients that are Byzantine in every round
    byzantine_mode: str = "random"  # random | flip | fixed
    byzantine_class: int = 0  # the class a "fixed" Byzantine client predicts for everything

    # Checked when constructed, by the config layer's mechanism (core/constraints.py).
    parameter_constraints: ClassVar = {
        **dict.fromkeys((*FAULT_MODES, "byzantine"), FRACTION),
        "corruption": Options(("random", *CORRUPTIONS), message=_NAMES),
        "tasks": Custom(
            lambda tasks: isinstance(tasks, list) and all(t in FAULTABLE_TASKS for t in tasks),
            f"allowed: a list of {', '.join(FAULTABLE_TASKS)}",
            message=_NAMES,
        ),
        "byzantine_mode": Options(BYZANTINE_MODES, message=_NAMES),
        "byzantine_class": Interval(int, 0, message="{key} = {value!r} must be {allowed}"),
    }
    parameter_rules: ClassVar = [
        Rule(
            lambda f: sum(getattr(f, m) for m in FAULT_MODES) <= 1 + 1e-12,
            lambda f: (
                "faults: dropout + straggler + crash + corrupt = "
                f"{sum(getattr(f, m) for m in FAULT_MODES):g} must be <= 1"
            ),
        )
    ]

    def __post_init__(self) -> None:
        check_instance(self, prefix="faults")

    @property
    def active(self) -> bool:
        return any(getattr(self, m) > 0 for m in (*FAULT_MODES, "byzantine"))


def _uniform(*parts: int | str) -> float:
    return derive_seed(*parts) / 2**63


class FaultInjector:
    """Decides, statelessly, which fault (if any) a client suffers on a task in a round."""

    def __init__(self, config: FaultConfig, client_ids: list[int], seed: int) -> None:
        self.config = config
        self.seed = int(seed)
        ids = sorted(client_ids)
        count = round(config.byzantine * len(ids))
        order = np.random.default_rng(derive_seed(seed, "byzantine-set") % 2**32).permutation(ids)
        self.byzantine = frozenset(int(c) for c in order[:count])

    def fault(self, round_num: int, client: int, task: str) -> str | None:
        """The fault mode of `client` on `task` in `round_num`, or None."""
        if task not in self.config.tasks:
            return None
        u = _uniform(self.seed, "fault", round_num, client)
        edge = 0.0
        for mode in FAULT_MODES:
            edge += getattr(self.config, mode)
            if u < edge:
                return mode
        return None

    def corruption(self, round_num: int, client: int) -> str:
        if self.config.corruption != "random":
            return self.config.corruption
        u = _uniform(self.seed, "corruption", round_num, client)
        return CORRUPTIONS[int(u * len(CORRUPTIONS))]

    def corrupt(
        self,
        reply: protocol.Reply,
        round_num: int,
        client: int,
        context: Mapping[str, int],
        max_bytes: int,
    ) -> protocol.Reply:
        """`reply` with every array replaced by a corrupted one (replies without arrays pass)."""
        if not reply.ok or not reply.arrays:
            return reply
        kind = self.corruption(round_num, client)
        rng = np.random.default_rng(derive_seed(self.seed, "corrupt", round_num, client) % 2**32)
        arrays = {
            k: corrupt_array(np.asarray(v), kind, rng, m=context["m"], max_bytes=max_bytes)
            for k, v in reply.arrays.items()
        }
        return protocol.Reply(reply.task, arrays=arrays, metrics=reply.metrics)

    def apply(
        self,
        reply: protocol.Reply,
        fault: str | None,
        round_num: int,
        client: int,
        context: Mapping[str, int],
        max_bytes: int,
    ) -> protocol.Reply:
        """The reply the server goes on with, before validation: a `corrupt` client's payload
        damaged, a Byzantine client's `predict_public` falsified, any other reply as it came."""
        if fault == "corrupt":
            return self.corrupt(reply, round_num, client, context, max_bytes)
        return self.byzantine_reply(reply, round_num, client, context["m"])

    def byzantine_reply(
        self, reply: protocol.Reply, round_num: int, client: int, m: int
    ) -> protocol.Reply:
        """A Byzantine client's hostile but valid answer to `predict_public`."""
        if client not in self.byzantine or reply.task != protocol.PREDICT_PUBLIC or not reply.ok:
            return reply
        rng = np.random.default_rng(derive_seed(self.seed, "byzantine", round_num, client) % 2**32)
        mode, fixed = self.config.byzantine_mode, self.config.byzantine_class % m
        arrays: dict[str, np.ndarray] = {}
        for name, array in reply.arrays.items():
            a = np.asarray(array)
            if name == "labels":  # hard labels (FedCT)
                n = len(a)
                if mode == "random":
                    out = rng.integers(0, m, n)
                elif mode == "flip":
                    out = m - 1 - a.astype(np.int64)
                else:
                    out = np.full(n, fixed)
                arrays[name] = out.astype(a.dtype)
            else:
                if mode == "random":
                    out = rng.dirichlet(np.ones(m), size=len(a))
                elif mode == "flip":
                    out = a[:, ::-1]
                else:
                    out = np.zeros_like(a)
                    out[:, fixed] = 1.0
                arrays[name] = np.ascontiguousarray(out, dtype=a.dtype)
        return protocol.Reply(reply.task, arrays=arrays, metrics=reply.metrics)


def crash_reply(message: protocol.Message) -> protocol.Reply:
    """What a client whose code raised at the start of `message`'s task answers."""
    err = InjectedCrash(f"injected crash in task {message.task!r}")
    return protocol.Reply(message.task, error=f"InjectedCrash: {err}", error_kind="crash")


LATE = "reply arrived after the deadline"
"""The rejection reason of a straggler's reply."""


def corrupt_array(
    a: np.ndarray, kind: str, rng: np.random.Generator, *, m: int, max_bytes: int
) -> Any:
    """`a` (soft labels or hard labels) damaged in the way `kind` names."""
    labels = np.issubdtype(a.dtype, np.integer)
    out = np.array(a, copy=True)
    if kind in ("nan", "inf"):
        out = out.astype(np.float32)
        idx = rng.integers(0, out.size, max(1, out.size // 100))
        out.flat[idx] = np.nan if kind == "nan" else np.inf
        return out
    if kind == "negative":
        out = out.astype(np.int64) if labels else out
        idx = rng.integers(0, out.size, max(1, out.size // 100))
        out.flat[idx] = -1 if labels else -np.abs(out.flat[idx]) - 0.1
        return out
    if kind in ("non_simplex", "label_range"):
        if labels:
            return out.astype(np.int64) + m
        return out * 2.0 if kind == "non_simplex" else out + 1.0
    if kind == "wrong_shape":
        # An extra axis, never a transpose: a square payload with symmetric rows (n = M,
        # uniform) transposes to itself and would pass validation.
        return out[..., None].copy()
    if kind == "wrong_dtype":
        return out.astype(np.float32) if labels else out.astype(np.int32)
    if kind == "empty":
        return out[:0]
    if kind == "truncated":
        return out[: len(out) // 2]
    if kind == "oversized":
        # A read-only view that reports more bytes than allowed without allocating them.
        rows = max_bytes // max(out[:1].nbytes, 1) + 1
        return np.broadcast_to(out[:1], (rows, *out.shape[1:]))
    if kind == "not_an_array":
        return out.tolist()
    raise ValueError(f"unknown corruption {kind!r}; allowed: {', '.join(CORRUPTIONS)}")


def fault_config(faults: FaultConfig | Mapping[str, Any] | None) -> FaultConfig | None:
    """Accept a FaultConfig, a plain mapping (as in a config file) or None."""
    if faults is None or isinstance(faults, FaultConfig):
        return faults
    return FaultConfig(**dict(faults))
