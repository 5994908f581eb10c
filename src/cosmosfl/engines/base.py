"""`BaseFederation`: what both engines do alike, around delivering messages.

The in-process engine (engines/simulation.py) calls `Client.handle`, possibly in worker
processes; the Flower engine (engines/flower/federation.py) queues items and sends them over
a Flower Grid. Everything around that delivery is the same and lives here once, so that a fix
to participation, faults or the round record reaches both engines:

- the `Federation` properties (U, classes, seed, device), phases and log lines;
- a round's counters: bytes per client and direction, seconds per phase, rejected replies
  (kept in step order, then client order), injected faults;
- a step (`send`): the requests converted to messages, the unknown-client check, the
  step's injected faults (decided statelessly, engines/faults.py), a dropped-out client
  never asked, a crashed one answered by a crash reply without being asked, a reply damaged
  or falsified before validation, a straggler's reply rejected as late, every other reply
  validated by core/protocol; the engine supplies only the delivery (`_deliver`);
- the participation rule (`min_participation`) and `ParticipationError`;
- the round itself (`run_round`): the algorithm's round, then its record (`RoundLog`);
- what the experiment layer may ask of any engine (`Engine`): its rounds, `sync_clients`,
  `close`, `map_public`.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cosmosfl.algorithms.base import Algorithm, Item, Metrics, Replies, Result, RoundRecord
from cosmosfl.core import codecs, protocol
from cosmosfl.core.tasks import Request, as_message
from cosmosfl.engines.faults import LATE, FaultInjector, crash_reply
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.progress import Reporter, SilentReporter
from cosmosfl.engines.record import RoundLog
from cosmosfl.learners.base import Learner
from cosmosfl.learners.device import resolve_device
from cosmosfl.privacy.accountant import ledger_of


class ParticipationError(RuntimeError):
    """Too few clients answered a step of a round (below `min_participation`)."""


class Engine(Protocol):
    """What the experiment layer uses of an engine (both engines are `BaseFederation`s)."""

    @property
    def client_ids(self) -> list[int]: ...

    def run_round(self, algorithm: Algorithm, round_num: int, rounds: int) -> dict[str, Any]:
        """Run one round of `algorithm`; its JSON-ready record (a line of metrics.jsonl)."""
        ...

    def map_public(
        self, fn: Callable[[np.ndarray, Item], Result], items: Sequence[Item]
    ) -> list[Result]: ...

    def sync_clients(self) -> None:
        """Bring the clients' trained learners into this process (for a checkpoint)."""
        ...

    def close(self) -> None:
        """Release what the engine holds (worker processes); the run is over."""
        ...


@dataclass
class Step:
    """One `send` (or, on Flower, one server evaluation): the clients asked, and what came
    back. An engine that delivers later (Flower) keeps it until the replies arrive."""

    task: str
    expect: Mapping[str, protocol.ArraySpec] | None
    clients: list[int]
    seq: int = 0  # the order of the steps in a round: rejections are recorded in that order
    tasks: dict[int, str] = field(default_factory=dict)  # each client's (a send may mix tasks)
    faults: dict[int, str] = field(default_factory=dict)  # injected, per client
    replies: dict[int, protocol.Reply] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    done: bool = False


class BaseFederation(ABC):
    """The engine-independent part of the algorithms' `Federation` view (see module doc).

    A subclass delivers messages (`_deliver`, `evaluate_server_models`), names its clients
    (`client_ids`), and may hook into a step (`_check_reply`), a round (`_begin_round`,
    `_end_round`, `_engine_fields`) and rejections (`_rejected_reply`)."""

    def __init__(
        self,
        public_x: np.ndarray,
        num_classes: int,
        fault_clients: Sequence[int],
        *,
        seed: int,
        device: str,
        reporter: Reporter | None,
        options: EngineOptions,
    ) -> None:
        """`fault_clients`: the clients faults are decided over (Byzantine ones among them),
        the same on both engines for the same config. Call it once the subclass can name its
        `client_ids`: it starts the round's counters."""
        self._public_x = np.asarray(public_x)
        self._num_classes = int(num_classes)
        self._seed = int(seed)
        self._device = str(resolve_device(device))
        self.reporter = reporter or SilentReporter()
        self.options = options
        self.max_payload_bytes = options.max_payload_bytes
        self.min_participation = float(options.min_participation)
        config = options.fault_config
        self.faults = (
            FaultInjector(config, list(fault_clients), self._seed)
            if config is not None and config.active
            else None
        )
        self._round = 0
        self._reset_round()

    # -- Federation --------------------------------------------------------------------------
    @property
    @abstractmethod
    def client_ids(self) -> list[int]: ...

    @property
    def num_classes(self) -> int:
        return self._num_classes

    @property
    def public_x(self) -> np.ndarray:
        return self._public_x

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def device(self) -> str:
        return self._device

    def send(
        self,
        messages: Mapping[int, Request | protocol.Message],
        expect: Mapping[str, protocol.ArraySpec] | None = None,
    ) -> Replies:
        """One step: each addressed client's injected fault, a dropped-out client never
        asked, a crashed one answered without being asked, the others' messages delivered
        (`_deliver`); every reply falsified where faulted and validated. The replies of the
        clients that answered, in client order."""
        wire = {cid: as_message(m) for cid, m in messages.items()}
        unknown = sorted(set(wire) - set(self.client_ids))
        if unknown:
            raise KeyError(f"message addressed to unknown client(s) {unknown}")
        task = next(iter(wire.values())).task if wire else protocol.EVALUATE
        step = Step(task, expect, sorted(wire), seq=self._next_step())
        step.tasks = {cid: m.task for cid, m in wire.items()}
        planned = self._plan_faults(wire)
        crashed, deliver = [], {}
        for cid in sorted(wire):
            message, fault = wire[cid], planned[cid]
            if fault is not None:
                step.faults[cid] = fault
            if not self._address(cid, message, fault, step.failures):
                continue
            if fault == "crash":  # raises at the start of the task: no work, an error reply
                crashed.append(cid)
            else:
                deliver[cid] = message
        return self._deliver(step, deliver, {cid: crash_reply(wire[cid]) for cid in crashed})

    @abstractmethod
    def _deliver(
        self,
        step: Step,
        messages: dict[int, protocol.Message],
        crashed: dict[int, protocol.Reply],
    ) -> Replies:
        """Deliver `messages` (client order) and `_accept` each reply, together with the
        `crashed` clients' replies in client order; `_close` the step once all are in, and
        return its replies (`step.replies`, or a mapping that reads them when first read)."""

    @abstractmethod
    def evaluate_server_models(
        self, models: Mapping[int, Learner], split: str = "test"
    ) -> Metrics: ...

    def map_public(
        self, fn: Callable[[np.ndarray, Item], Result], items: Sequence[Item]
    ) -> list[Result]:
        """`[fn(public_x, item) for item in items]`, here in order (an engine with worker
        processes runs them there)."""
        return [fn(self._public_x, item) for item in items]

    def sync_clients(self) -> None:
        """Nothing to bring back by default: the clients live elsewhere (Flower's nodes)."""
        return None

    def close(self) -> None:
        """Nothing to release by default."""
        return None

    def predict_server_models(
        self, models: Mapping[int, Learner], split: str
    ) -> dict[int, np.ndarray]:
        """Not on this engine: a server model does not travel to the sites (in-process only)."""
        self.log("deploy_mix needs the server models at the sites: measured in-process only")
        return {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.reporter.phase(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[name] += time.perf_counter() - start

    def log(self, text: str) -> None:
        self.reporter.log(f"round {self._round}: {text}")

    # -- a step ------------------------------------------------------------------------------
    @property
    def _context(self) -> dict[str, int]:
        """What validation and fault injection need to know of a reply's shape: |U| and M."""
        return {"n": len(self._public_x), "m": self._num_classes}

    def _next_step(self) -> int:
        """Number a new step of the round: rejections are recorded in step order."""
        self._steps += 1
        return self._steps

    def _plan_faults(self, messages: Mapping[int, protocol.Message]) -> dict[int, str | None]:
        """The fault injected into each addressed client's task in this step (None: none)."""
        return {
            cid: self.faults.fault(self._round, cid, m.task) if self.faults is not None else None
            for cid, m in messages.items()
        }

    def _address(
        self, cid: int, message: protocol.Message, fault: str | None, failures: list[str]
    ) -> bool:
        """Record `cid`'s injected fault and count `message` as sent to it; False when the
        client dropped out (offline: never asked, nothing sent or received)."""
        if fault is not None:
            self._faults.append({"client": cid, "task": message.task, "fault": fault})
        if fault == "dropout":
            failures.append(f"client {cid} dropped out")
            return False
        self._bytes_down[cid] += protocol.message_bytes(message)
        return True

    def _falsify(self, cid: int, reply: protocol.Reply, fault: str | None) -> protocol.Reply:
        """The reply the server goes on with: a corrupt client's payload damaged, a Byzantine
        client's soft labels falsified, any other reply as it came."""
        if self.faults is None:
            return reply
        return self.faults.apply(
            reply, fault, self._round, cid, self._context, self.max_payload_bytes
        )

    def _accept(self, step: Step, cid: int, reply: Any) -> None:
        """Go on with `cid`'s reply to `step`: falsified where faulted, checked by the engine
        (`_check_reply`), validated; kept in `step.replies` when accepted."""
        task, fault = step.tasks.get(cid, step.task), step.faults.get(cid)
        reply = self._falsify(cid, reply, fault)
        self._check_reply(cid, task, reply)
        accepted = self._receive(step.seq, cid, task, reply, fault, step.expect, step.failures)
        if accepted is not None:
            step.replies[cid] = accepted

    def _check_reply(self, cid: int, task: str, reply: Any) -> None:
        """Told of every reply before validation; the in-process engine raises here on an
        exception in client code (`strict`)."""
        return None  # validation alone decides by default

    def _close(self, step: Step) -> None:
        """Mark a step answered; stop the run if too few clients answered it."""
        step.done = True
        self._check_participation(step.task, len(step.clients), len(step.replies), step.failures)

    def _receive(
        self,
        step: int,
        cid: int,
        task: str,
        reply: Any,
        fault: str | None,
        expect: Mapping[str, protocol.ArraySpec] | None,
        failures: list[str],
    ) -> protocol.Reply | None:
        """Count `reply`'s bytes and validate it (the task's reply spec, or `expect`): the
        validated reply, or None when it is rejected (recorded, logged, `_rejected_reply`)."""
        if isinstance(reply, protocol.Reply):  # user code may answer anything: no size then
            self._bytes_up[cid] += protocol.message_bytes(reply)
        spec = protocol.REPLY_SPECS[task] if expect is None else expect
        try:
            if fault == "straggler":  # it did the work; its reply is too late to be used
                raise protocol.PayloadError(cid, task, LATE)
            received = codecs.receive_reply(
                reply,
                spec,
                self._context,
                client_id=cid,
                task=task,
                max_bytes=self.max_payload_bytes,
            )
        except protocol.PayloadError as err:
            failures.append(str(err))
            self._reject(step, cid, task, err.reason)
            self.log(str(err))
            self._rejected_reply(cid, task, err.reason, fault)
            return None
        ledger = ledger_of(received.metrics)
        if ledger:  # a private fit's ε spent so far (privacy/accountant.py), for the record
            self._privacy[cid] = ledger
        return received

    def _reject(self, step: int, cid: int, task: str, reason: str) -> None:
        entry = {"client": cid, "task": task, "reason": reason}
        self._rejections.append(((step, cid), entry))

    def _rejected_reply(self, cid: int, task: str, reason: str, fault: str | None) -> None:
        """Told of every rejected reply once it is recorded (`fault`: the injected one, if
        any); the in-process engine raises or warns here as its `on_reject` asks."""
        return None  # the Flower engine only records

    @property
    def _rejected(self) -> list[dict[str, Any]]:
        """The round's rejected replies in step order, then client order: the order the
        in-process engine meets them, whatever order Flower's replies arrive in."""
        return [entry for _, entry in sorted(self._rejections, key=lambda e: e[0])]

    def _check_participation(
        self, task: str, asked: int, answered: int, failures: list[str]
    ) -> None:
        """End the run (ParticipationError) when no client, or fewer than `min_participation`
        of the `asked`, answered a step."""
        if not asked:
            return
        if not answered:
            raise ParticipationError(
                f"round {self._round}: every client failed task {task!r}; "
                f"first error: {failures[0] if failures else 'none'}"
            )
        need = math.ceil(self.min_participation * asked - 1e-9)
        if answered < need:
            raise ParticipationError(
                f"round {self._round}: only {answered} of {asked} clients answered "
                f"task {task!r}; min_participation = {self.min_participation:g} needs {need} "
                "(lower min_participation to train on fewer clients)"
            )

    # -- a round -----------------------------------------------------------------------------
    def _reset_round(self) -> None:
        ids = self.client_ids
        self._bytes_up: dict[int, int] = dict.fromkeys(ids, 0)
        self._bytes_down: dict[int, int] = dict.fromkeys(ids, 0)
        self._seconds: dict[str, float] = defaultdict(float)
        self._rejections: list[tuple[tuple[int, int], dict[str, Any]]] = []
        self._faults: list[dict[str, Any]] = []
        self._privacy: dict[int, dict[str, float]] = {}
        self._steps = 0

    def _begin_round(self, algorithm: Algorithm) -> None:
        """Before the algorithm's round starts (and its clock)."""
        return None  # nothing to prepare by default

    def _end_round(self, report: RoundRecord) -> None:
        """After the algorithm's round, on the round's clock: finish what is still pending."""
        return None  # nothing pending by default

    def _engine_fields(self) -> dict[str, Any]:
        """The round record's fields only this engine measures (RoundLog's optional ones)."""
        return {}

    def run_round(self, algorithm: Algorithm, round_num: int, rounds: int) -> dict[str, Any]:
        """Run one round of `algorithm` and return its JSON-ready record (`RoundLog.to_json`,
        with `faults` and `byzantine` when faults are injected)."""
        self._round = round_num
        self._reset_round()
        self.reporter.round_start(round_num, rounds)
        self._begin_round(algorithm)
        start = time.perf_counter()
        report = algorithm.run_round(self, round_num)
        self._end_round(report)
        report.resolve()  # metrics the round has not read yet (replies read when first read)
        total = time.perf_counter() - start
        record = RoundLog(
            round_num,
            algorithm.name,
            algorithm.reported_model,
            report,
            bytes_up=self._bytes_up,
            bytes_down=self._bytes_down,
            seconds=self._seconds,
            total_seconds=total,
            rejected=self._rejected,
            faults=None if self.faults is None else self._faults,
            byzantine=None if self.faults is None else sorted(self.faults.byzantine),
            privacy=dict(sorted(self._privacy.items())) or None,
            **self._engine_fields(),
        ).to_json()
        self.reporter.round_end(record)
        return record
