"""`FlowerFederation`: the algorithms' `Federation` view over a Flower `Grid`.

It mirrors the in-process engine (engines/simulation.py): one protocol message per client per
step, every reply validated by core/protocol, payload bytes counted per client and direction,
rejected payloads recorded, phases timed, one JSON-ready record per round. What differs is the
network:

- Clients are found by an empty "discovery" message; each answers with its `partition-id`,
  the stable id used for clusters and metrics (Flower's node ids are random).
- A round trip costs seconds (SuperNodes poll), so requests whose replies carry no arrays
  (train_local, distill, evaluate) are queued, not sent: the queue travels with the next message
  that needs an answer, as one Flower message per client holding the items in order. The
  replies of a queued request resolve when first read (which sends the queue at once), so an
  algorithm sees exactly what the in-process engine would give it.
- A client that does not answer within `reply_timeout` (also the message TTL), whose
  ClientApp fails, or whose SuperNode is offline is left out of that step and recorded under
  `missing` in the round's record; the run goes on with the others (down to
  `min_participation`, as in-process).
- Injected faults (`faults`, engines/faults.py) are applied here, on the server side, with the
  in-process engine's decisions: a dropped-out client is not sent its items, a crashed one is
  answered by a crash reply without being asked, a straggler's reply is discarded when it
  arrives, and a corrupt or Byzantine client's decoded reply is damaged or falsified before
  validation. The records equal the in-process engine's (docs/flower.md, "Injected faults").
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
from flwr.app import Message
from flwr.serverapp import Grid

from cosmosfl.algorithms.base import Algorithm, DeferredMetrics
from cosmosfl.core import codecs, protocol
from cosmosfl.core.tasks import Request, as_message
from cosmosfl.engines.faults import LATE, FaultConfig, FaultInjector, crash_reply, fault_config
from cosmosfl.engines.flower import codec
from cosmosfl.engines.flower.tickets import PendingReplies, Ticket, server_eval_item
from cosmosfl.engines.progress import Reporter, SilentReporter
from cosmosfl.engines.record import RoundLog
from cosmosfl.engines.simulation import ParticipationError
from cosmosfl.learners.base import Learner
from cosmosfl.learners.device import resolve_device


class FlowerFederation:
    """Implements `Federation` over a Flower Grid (simulation or deployment runtime)."""

    def __init__(
        self,
        grid: Grid,
        public_x: np.ndarray,
        num_classes: int,
        *,
        expected_clients: list[int],
        seed: int = 0,
        device: str = "cpu",
        reporter: Reporter | None = None,
        reply_timeout: float = 600.0,
        discovery_timeout: float = 300.0,
        max_payload_bytes: int = protocol.DEFAULT_MAX_PAYLOAD_BYTES,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        min_participation: float = 0.0,
    ) -> None:
        """`faults` and `min_participation` as in `SimulationEngine`: the same seeded faults
        (decided over `expected_clients`, so the Byzantine set is the in-process one), and a
        step answered by fewer than `min_participation` of the clients it addressed ends the
        run (ParticipationError)."""
        if not 0 <= min_participation <= 1:
            raise ValueError(f"min_participation must lie in [0, 1], got {min_participation}")
        self.grid = grid
        self._public_x = np.asarray(public_x)
        self._num_classes = int(num_classes)
        self._expected = sorted(expected_clients)
        self._seed = int(seed)
        self._device = str(resolve_device(device))
        self.reporter = reporter or SilentReporter()
        self.reply_timeout = float(reply_timeout)
        self.discovery_timeout = float(discovery_timeout)
        self.max_payload_bytes = max_payload_bytes
        self.min_participation = float(min_participation)
        config = fault_config(faults)
        self.faults = (
            FaultInjector(config, self._expected, self._seed)
            if config is not None and config.active
            else None
        )
        self._nodes: dict[int, int] = {}  # partition id -> Flower node id
        self.refused: dict[int, str] = {}  # client id -> why it refused to join (sites)
        self.client_models: dict[int, str] = {}  # client id -> the model its site says it has
        self._queue: dict[int, list[tuple[Ticket, codec.Item]]] = defaultdict(list)
        self._round = 0
        self._reset_round()

    # -- discovery ---------------------------------------------------------------------------
    def connect(self, poll_seconds: float = 1.0) -> list[int]:
        """Find the SuperNodes and the partition id each serves; return the client ids found."""
        deadline = time.monotonic() + self.discovery_timeout
        answered: set[int] = set()
        while True:
            waiting = [n for n in self.grid.get_node_ids() if n not in answered]
            if waiting:
                timeout = max(1.0, min(self.reply_timeout, deadline - time.monotonic()))
                hello = [self._message(n, codec.Batch([], 0), timeout) for n in waiting]
                for reply in self.grid.send_and_receive(hello, timeout=timeout):
                    if reply.has_error():
                        continue
                    node = reply.metadata.src_node_id
                    answered.add(node)
                    try:
                        pid, _ = codec.decode_replies(reply.content)
                        hello = codec.decode_hello(reply.content)
                    except codec.RecordError as err:
                        self.reporter.log(f"node {node} answered discovery malformed: {err}")
                        continue
                    if "refused" in hello and pid in self._expected:
                        if pid not in self.refused:
                            self.reporter.log(f"client {pid} refused to join: {hello['refused']}")
                        self.refused[pid] = hello["refused"]  # a restarted node is asked anew
                        continue
                    if pid not in self._expected:
                        self.reporter.log(f"node {node} serves partition {pid}, not in the config")
                    elif pid in self._nodes:
                        self.reporter.log(f"node {node} serves partition {pid} again; ignored")
                    else:
                        self._nodes[pid] = node
                        self.refused.pop(pid, None)
                        if "model" in hello:
                            self.client_models[pid] = hello["model"]
            settled = set(self._nodes) | set(self.refused)  # a refusal is an answer: no wait
            if set(self._expected) <= settled or time.monotonic() >= deadline:
                break
            time.sleep(poll_seconds)
        if not self._nodes:
            why = "".join(f"; client {c} refused: {r}" for c, r in sorted(self.refused.items()))
            raise RuntimeError(
                f"no client connected within {self.discovery_timeout:.0f} s "
                f"(expected partition ids {self._expected}){why}"
            )
        absent = sorted(set(self._expected) - set(self._nodes) - set(self.refused))
        if self.refused:
            self.reporter.log(f"starting without clients {sorted(self.refused)} (refused)")
        if absent:
            self.reporter.log(f"starting without clients {absent} (not connected)")
        self._node_to_client = {n: c for c, n in self._nodes.items()}
        self._reset_round()
        return self.client_ids

    @property
    def unconnected(self) -> list[int]:
        """Clients of the config that never answered (not those that refused to join)."""
        return sorted(set(self._expected) - set(self._nodes) - set(self.refused))

    # -- Federation --------------------------------------------------------------------------
    @property
    def client_ids(self) -> list[int]:
        return sorted(self._nodes)

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
    ) -> dict[int, protocol.Reply]:
        messages = {cid: as_message(m) for cid, m in messages.items()}
        task = next(iter(messages.values())).task if messages else protocol.EVALUATE
        unknown = sorted(set(messages) - set(self._nodes))
        if unknown:
            raise KeyError(f"message addressed to unknown client(s) {unknown}")
        ticket = self._ticket(task, expect, sorted(messages))
        queued = False
        for cid in sorted(messages):
            message = messages[cid]
            fault = self.faults.fault(self._round, cid, message.task) if self.faults else None
            if fault is not None:
                ticket.faults[cid] = fault
                self._faults.append({"client": cid, "task": message.task, "fault": fault})
            if fault == "dropout":  # offline: never asked, nothing sent or received
                ticket.failures.append(f"client {cid} dropped out")
                continue
            self._bytes_down[cid] += protocol.message_bytes(message)
            if fault == "crash":  # raises at the start of the task: no work, an error reply
                self._accept(ticket, cid, codec.ItemReply(codec.PROTOCOL, crash_reply(message)))
                continue
            self._queue[cid].append((ticket, message))
            queued = True
        if not queued:  # every addressed client dropped out or crashed
            self._close(ticket)
            return dict(sorted(ticket.replies.items()))
        specs = [
            protocol.REPLY_SPECS[m.task] if expect is None else expect for m in messages.values()
        ]
        if any(specs):  # the caller needs arrays back now
            self.flush()
            return dict(sorted(ticket.replies.items()))
        return PendingReplies(self, ticket)  # type: ignore[return-value]

    def _ticket(
        self, task: str, expect: Mapping[str, protocol.ArraySpec] | None, clients: list[int]
    ) -> Ticket:
        self._steps += 1
        return Ticket(task, expect, clients, seq=self._steps)

    def evaluate_server_models(
        self, models: Mapping[int, Learner], split: str = "test"
    ) -> dict[int, dict[str, float]]:
        """h_π(i) on client i's test split (or `split`): the model's weights (as they are now)
        travel to client i in an evaluation-only item, counted as `eval_bytes_down`, not as
        protocol traffic. Deferred like metric-only requests: the item joins the next message."""
        ticket = self._ticket("server_eval", None, [])
        encoded: dict[int, codec.ServerEval | None] = {}
        targets = [cid for cid in sorted(models) if cid in self._nodes]
        for cid in targets:
            if id(models[cid]) not in encoded:
                encoded[id(models[cid])] = server_eval_item(models[cid], split)
        if any(item is None for item in encoded.values()):
            self.log(
                "a server model cannot be rebuilt on clients (only registry models can): "
                "h_π(i) is not measured on Flower"
            )
            return {}
        for cid in targets:
            item = encoded[id(models[cid])]
            assert item is not None
            ticket.clients.append(cid)
            self._eval_bytes_down[cid] += protocol.payload_bytes(item.arrays)
            self._queue[cid].append((ticket, item))

        def read() -> dict[int, dict[str, float]]:
            if not ticket.done:
                self.flush()
            return {cid: dict(r.metrics) for cid, r in sorted(ticket.replies.items())}

        return DeferredMetrics(read)  # type: ignore[return-value]

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

    # -- the wire ----------------------------------------------------------------------------
    def _message(self, node: int, batch: codec.Batch, ttl: float) -> Message:
        return Message(
            codec.encode_batch(batch),
            dst_node_id=node,
            message_type=codec.MESSAGE_TYPE,
            ttl=ttl,
            group_id=str(self._round),
        )

    def flush(self) -> None:
        """Send every queued item (one Flower message per client) and wait for the replies."""
        queued = {cid: items for cid, items in self._queue.items() if items}
        self._queue = defaultdict(list)
        if not queued:
            return
        self._round_trips += 1
        online = set(self.grid.get_node_ids())
        outgoing = []
        for cid, items in queued.items():
            if self._nodes[cid] not in online:
                self._miss(cid, items, "SuperNode offline")
                continue
            batch = codec.Batch([item for _, item in items], self._round)
            outgoing.append(self._message(self._nodes[cid], batch, self.reply_timeout))
        answered: set[int] = set()
        start = time.monotonic()
        for reply in self.grid.send_and_receive(outgoing, timeout=self.reply_timeout):
            cid = self._node_to_client.get(reply.metadata.src_node_id)
            if cid is None or cid not in queued or cid in answered:
                continue
            answered.add(cid)
            if reply.has_error():
                self._miss(cid, queued[cid], f"ClientApp failed: {reply.error.reason}")
                continue
            try:
                pid, item_replies = codec.decode_replies(reply.content)
            except codec.RecordError as err:
                self._refuse(cid, queued[cid], f"malformed reply: {err}")
                continue
            if pid != cid or len(item_replies) != len(queued[cid]):
                self._miss(cid, queued[cid], f"malformed reply (partition {pid})")
                continue
            for (ticket, _), item_reply in zip(queued[cid], item_replies, strict=True):
                self._accept(ticket, cid, item_reply)
        waited = time.monotonic() - start
        for cid, items in queued.items():
            if cid not in answered and self._nodes[cid] in online:
                # Flower stops waiting early for messages it knows cannot be answered.
                self._miss(
                    cid, items, f"no reply (waited {waited:.0f} of {self.reply_timeout:g} s)"
                )
        for ticket in {id(t): t for items in queued.values() for t, _ in items}.values():
            self._close(ticket)

    def _close(self, ticket: Ticket) -> None:
        """Mark a step answered; stop the run if too few clients answered it (as in-process)."""
        ticket.done = True
        if not ticket.clients or ticket.task == "server_eval":
            return
        if not ticket.replies:
            raise ParticipationError(
                f"round {self._round}: every client failed task {ticket.task!r}; "
                f"first error: {ticket.failures[0] if ticket.failures else 'none'}"
            )
        need = math.ceil(self.min_participation * len(ticket.clients) - 1e-9)
        if len(ticket.replies) < need:
            raise ParticipationError(
                f"round {self._round}: only {len(ticket.replies)} of {len(ticket.clients)} "
                f"clients answered task {ticket.task!r}; min_participation = "
                f"{self.min_participation:g} needs {need} "
                "(lower min_participation to train on fewer clients)"
            )

    def _accept(self, ticket: Ticket, cid: int, item: codec.ItemReply) -> None:
        reply, fault = item.reply, ticket.faults.get(cid)
        if fault != "crash":  # a crashed client was never asked
            self._client_seconds[ticket.task][cid] += item.seconds
        if item.kind == codec.SERVER_EVAL:
            bad = [k for k, v in reply.metrics.items() if not protocol.is_finite_number(v)]
            if reply.ok and not bad:
                ticket.replies[cid] = reply
            else:
                reason = reply.error or f"metrics {bad} are not finite numbers"
                self._reject(ticket, cid, reason)
            return
        context = {"n": len(self._public_x), "m": self._num_classes}
        if self.faults is not None:
            reply = self.faults.apply(
                reply, fault, self._round, cid, context, self.max_payload_bytes
            )
        self._bytes_up[cid] += protocol.message_bytes(reply)
        spec = protocol.REPLY_SPECS[ticket.task] if ticket.expect is None else ticket.expect
        try:
            if fault == "straggler":  # it did the work; its reply is too late to be used
                raise protocol.PayloadError(cid, ticket.task, LATE)
            ticket.replies[cid] = codecs.receive_reply(
                reply,
                spec,
                context,
                client_id=cid,
                task=ticket.task,
                max_bytes=self.max_payload_bytes,
            )
        except protocol.PayloadError as err:
            ticket.failures.append(str(err))
            self._reject(ticket, cid, err.reason)
            self.log(str(err))

    def _reject(self, ticket: Ticket, cid: int, reason: str) -> None:
        entry = {"client": cid, "task": ticket.task, "reason": reason}
        self._rejected.append(((ticket.seq, cid), entry))

    def _refuse(self, cid: int, items: list[tuple[Ticket, codec.Item]], reason: str) -> None:
        """A reply that came but could not be read: every item it answers is rejected."""
        for ticket, _ in items:
            ticket.failures.append(f"client {cid}: {reason}")
            self._reject(ticket, cid, reason)
        self.log(f"client {cid}: {reason}")

    def _miss(self, cid: int, items: list[tuple[Ticket, codec.Item]], reason: str) -> None:
        for ticket, _ in items:
            ticket.failures.append(f"client {cid}: {reason}")
            self._missing.append({"client": cid, "task": ticket.task, "reason": reason})
        self.log(f"client {cid} missing from {len(items)} step(s): {reason}")

    # -- rounds ------------------------------------------------------------------------------
    def _reset_round(self) -> None:
        self._bytes_up: dict[int, int] = dict.fromkeys(sorted(self._nodes), 0)
        self._bytes_down: dict[int, int] = dict.fromkeys(sorted(self._nodes), 0)
        self._eval_bytes_down: dict[int, int] = dict.fromkeys(sorted(self._nodes), 0)
        self._seconds: dict[str, float] = defaultdict(float)
        self._client_seconds: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        # (step, client) -> entry: recorded in step order, then client order, as in-process
        self._rejected: list[tuple[tuple[int, int], dict[str, Any]]] = []
        self._missing: list[dict[str, Any]] = []
        self._faults: list[dict[str, Any]] = []
        self._round_trips = 0
        self._steps = 0

    def run_round(self, algorithm: Algorithm, round_num: int, rounds: int) -> dict[str, Any]:
        """Run one round of `algorithm` and return its record (the simulation engine's format,
        with `faults` and `byzantine` when faults are injected, plus `missing`,
        `eval_bytes_down`, `client_seconds` and `round_trips`)."""
        self._round = round_num
        self._reset_round()
        self.reporter.round_start(round_num, rounds)
        start = time.perf_counter()
        rec = algorithm.run_round(self, round_num)
        with self.phase("flush"):
            self.flush()  # queued steps belong to this round
        rec.resolve()
        total = time.perf_counter() - start
        record = RoundLog(
            round_num,
            algorithm.name,
            algorithm.reported_model,
            rec,
            bytes_up=self._bytes_up,
            bytes_down=self._bytes_down,
            seconds=self._seconds,
            total_seconds=total,
            rejected=[entry for _, entry in sorted(self._rejected, key=lambda e: e[0])],
            eval_bytes_down=self._eval_bytes_down,
            client_seconds=self._client_seconds,
            round_trips=self._round_trips,
            missing=self._missing,
            faults=None if self.faults is None else self._faults,
            byzantine=None if self.faults is None else sorted(self.faults.byzantine),
        ).to_json()
        self.reporter.round_end(record)
        return record
