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

What both engines do alike (faults, validation, participation, the round and its record) is
inherited from `BaseFederation` (engines/base.py); this module is the Flower delivery.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Message
from flwr.serverapp import Grid

from cosmosfl.algorithms.base import DeferredMetrics, Metrics, Replies, RoundRecord
from cosmosfl.core import protocol
from cosmosfl.engines.base import BaseFederation, Step
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.engines.flower import codec
from cosmosfl.engines.flower.tickets import LazyReplies, server_eval_item
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.progress import Reporter
from cosmosfl.learners.base import Learner


class FlowerFederation(BaseFederation):
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
        options: EngineOptions | None = None,
        max_payload_bytes: int | None = None,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        min_participation: float | None = None,
    ) -> None:
        """`options` as in `InProcessEngine` (the keywords of the same names, the older way,
        win where given): the same seeded faults (decided over `expected_clients`, so the
        Byzantine set is the in-process one), the payload limit, and a step answered by fewer
        than `min_participation` of the clients it addressed ends the run
        (ParticipationError). Its worker settings do not apply: clients run on their nodes."""
        options = (options or EngineOptions()).with_keywords(
            max_payload_bytes=max_payload_bytes, faults=faults, min_participation=min_participation
        )
        self.grid = grid
        self._expected = sorted(expected_clients)
        self.reply_timeout = float(reply_timeout)
        self.discovery_timeout = float(discovery_timeout)
        self._nodes: dict[int, int] = {}  # partition id -> Flower node id
        self.refused: dict[int, str] = {}  # client id -> why it refused to join (sites)
        self.client_models: dict[int, str] = {}  # client id -> the model its site says it has
        self._queue: dict[int, list[tuple[Step, codec.Item]]] = defaultdict(list)
        super().__init__(
            public_x,
            num_classes,
            self._expected,
            seed=seed,
            device=device,
            reporter=reporter,
            options=options,
        )

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

    def _deliver(
        self,
        step: Step,
        messages: dict[int, protocol.Message],
        crashed: dict[int, protocol.Reply],
    ) -> Replies:
        """Queue the messages; send the queue now when the replies carry arrays, else return
        replies that send it when first read (module doc)."""
        for cid, reply in sorted(crashed.items()):
            self._accept(step, cid, reply)
        for cid, message in sorted(messages.items()):
            self._queue[cid].append((step, message))
        if not messages:  # every addressed client dropped out or crashed
            self._close(step)
            return dict(sorted(step.replies.items()))
        spec = step.expect
        specs = [protocol.REPLY_SPECS[m.task] if spec is None else spec for m in messages.values()]
        if any(specs):
            self.flush()  # the caller needs arrays back now
            return dict(sorted(step.replies.items()))
        return LazyReplies(self, step)

    def evaluate_server_models(self, models: Mapping[int, Learner], split: str = "test") -> Metrics:
        """h_π(i) on client i's test split (or `split`): the model's weights (as they are now)
        travel to client i in an evaluation-only item, counted as `eval_bytes_down`, not as
        protocol traffic. Deferred like metric-only requests: the item joins the next message."""
        step = Step("server_eval", None, [], seq=self._next_step())
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
            step.clients.append(cid)
            self._eval_bytes_down[cid] += protocol.payload_bytes(item.arrays)
            self._queue[cid].append((step, item))

        def read() -> dict[int, dict[str, float]]:
            if not step.done:
                self.flush()
            return {cid: dict(r.metrics) for cid, r in sorted(step.replies.items())}

        return DeferredMetrics(read)

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
            for (step, _), item_reply in zip(queued[cid], item_replies, strict=True):
                self._accept_item(step, cid, item_reply)
        waited = time.monotonic() - start
        for cid, items in queued.items():
            if cid not in answered and self._nodes[cid] in online:
                # Flower stops waiting early for messages it knows cannot be answered.
                self._miss(
                    cid, items, f"no reply (waited {waited:.0f} of {self.reply_timeout:g} s)"
                )
        for step in {id(t): t for items in queued.values() for t, _ in items}.values():
            self._close(step)

    def _close(self, step: Step) -> None:
        """A server evaluation is a measurement, not a step of the protocol: no participation
        rule for it."""
        if step.task == "server_eval":
            step.done = True
        else:
            super()._close(step)

    def _accept_item(self, step: Step, cid: int, item: codec.ItemReply) -> None:
        """An item's answer: its client-side seconds, then a server evaluation's metrics or a
        protocol reply (`_accept`)."""
        reply = item.reply
        self._client_seconds[step.task][cid] += item.seconds
        if item.kind == codec.SERVER_EVAL:
            bad = [k for k, v in reply.metrics.items() if not protocol.is_finite_number(v)]
            if reply.ok and not bad:
                step.replies[cid] = reply
            else:
                reason = reply.error or f"metrics {bad} are not finite numbers"
                self._reject(step.seq, cid, step.task, reason)
            return
        self._accept(step, cid, reply)

    def _refuse(self, cid: int, items: list[tuple[Step, codec.Item]], reason: str) -> None:
        """A reply that came but could not be read: every item it answers is rejected."""
        for step, _ in items:
            step.failures.append(f"client {cid}: {reason}")
            self._reject(step.seq, cid, step.task, reason)
        self.log(f"client {cid}: {reason}")

    def _miss(self, cid: int, items: list[tuple[Step, codec.Item]], reason: str) -> None:
        for step, _ in items:
            step.failures.append(f"client {cid}: {reason}")
            self._missing.append({"client": cid, "task": step.task, "reason": reason})
        self.log(f"client {cid} missing from {len(items)} step(s): {reason}")

    # -- rounds ------------------------------------------------------------------------------
    def _reset_round(self) -> None:
        super()._reset_round()
        self._eval_bytes_down: dict[int, int] = dict.fromkeys(self.client_ids, 0)
        self._client_seconds: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self._missing: list[dict[str, Any]] = []
        self._round_trips = 0

    def _end_round(self, report: RoundRecord) -> None:
        with self.phase("flush"):
            self.flush()  # queued steps belong to this round

    def _engine_fields(self) -> dict[str, Any]:
        """What only Flower records: `missing` clients, `eval_bytes_down`, `client_seconds`
        and `round_trips` (RoundLog)."""
        return {
            "eval_bytes_down": self._eval_bytes_down,
            "client_seconds": self._client_seconds,
            "round_trips": self._round_trips,
            "missing": self._missing,
        }
