"""The in-process simulation engine: every client in memory, deterministic, one machine.

The engine delivers protocol messages to `Client.handle`, validates every reply, counts every
payload byte per client and direction, times each phase, and collects per-round records. It
does not know which algorithm it runs: it gives the clients the algorithm's client handlers
(`Algorithm.client_handlers`) and reads its name for the record. What it does alike with the
Flower engine (faults, validation, participation, the round and its record) is inherited from
`BaseFederation` (engines/base.py); what is its own is delivery: in this process or in worker
processes, and what a failing client's reply does (`strict`, `on_reject`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.engines.base import BaseFederation, Item, Result, Step
from cosmosfl.engines.base import ParticipationError as ParticipationError  # its old home
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.progress import Reporter
from cosmosfl.engines.workers import WorkerPool, resolve_workers, round_work
from cosmosfl.handlers.base import ClientHandlers, handlers_for
from cosmosfl.learners.base import Learner


class ClientError(RuntimeError):
    """Client code raised an exception (strict mode). `client_id`, `task`, `error` (the
    exception as one line) and `client_traceback` say where, when known."""

    client_id: int | None = None
    task: str | None = None
    error: str | None = None
    client_traceback: str | None = None


class ClientRejectedError(ClientError, ValueError):
    """A client's reply was rejected (bad payload, non-finite metric, error reply), so the
    client would be left out of a step: raised with `on_reject="raise"` (`simulate(...,
    strict=True)`) so that a broken client cannot silently shrink the federation. A ClientError
    (the strict-mode family) and a ValueError (the client's output is bad)."""

    def __init__(self, message: str, *, round_num: int, client_id: int, task: str, reason: str):
        super().__init__(message)
        self.round_num, self.client_id, self.task, self.reason = round_num, client_id, task, reason


class ClientRejectedWarning(UserWarning):
    """The warning `on_reject="warn"` (`simulate(..., strict=False)`) gives for a rejected
    reply; the client is excluded from that step and the run goes on."""


ON_REJECT = ("record", "warn", "raise")


class InProcessEngine(BaseFederation):
    """Implements the algorithms' `Federation` view over in-memory clients."""

    def __init__(
        self,
        clients: Sequence[Client],
        public_x: np.ndarray,
        *,
        seed: int = 0,
        device: str = "cpu",
        reporter: Reporter | None = None,
        options: EngineOptions | None = None,
        strict: bool = True,
        on_reject: str = "record",
        max_payload_bytes: int | None = None,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        min_participation: float | None = None,
        workers: int | str | None = None,
        worker_devices: Sequence[str] | None = None,
        threads: int | None = None,
    ) -> None:
        """`options` (engines/options.py): faults, `min_participation`, the payload limit and
        the worker processes; the keywords of the same names are the older way to give them,
        and win over `options` where given. Injected faults (`faults`, see engines/faults.py)
        never stop a run. A step answered by fewer than `min_participation` of the clients it
        addressed ends the run (ParticipationError). `workers` > 1 serves clients from that
        many processes, `threads` torch threads each (engines/workers.py; "auto": one per
        usable core, at most one per client, serial when the round's work is small:
        `round_work` below AUTO_MIN_VALUES); the
        algorithm's `map_public` work (COSMOS's cluster models) runs there too.
        `sync_clients()` / `close()` bring the trained learners back.
        `strict`: an exception raised by client code stops the run with its traceback
        (a bug should not silently shrink the federation); otherwise the client is excluded
        from that step like a client whose payload was rejected.
        `on_reject`: what a rejected reply (the client is excluded from the step) does beyond
        its `rejected` entry in the round record: "record" nothing more, "warn" a
        ClientRejectedWarning, "raise" a ClientRejectedError at once. Replies of injected
        faults (and of Byzantine clients) are only ever recorded: they are deliberate."""
        if on_reject not in ON_REJECT:
            raise ValueError(f"on_reject = {on_reject!r}; allowed: {', '.join(ON_REJECT)}")
        self.on_reject = on_reject
        options = (options or EngineOptions()).with_keywords(
            faults=faults,
            min_participation=min_participation,
            max_payload_bytes=max_payload_bytes,
            workers=workers,
            threads=threads,
            worker_devices=worker_devices,
        )
        if not clients:
            raise ValueError("a federation needs at least one client")
        ids = [c.id for c in clients]
        if len(set(ids)) != len(ids):
            raise ValueError(f"client ids must be unique, got {ids}")
        classes = {c.num_classes for c in clients}
        if len(classes) != 1:
            raise ValueError(f"all clients must predict the same number of classes, got {classes}")
        public_x = np.asarray(public_x)
        if len(public_x) == 0:
            raise ValueError("the public set U is empty")
        self._clients = {c.id: c for c in sorted(clients, key=lambda c: c.id)}
        for c in self._clients.values():
            c.public_x = public_x
        super().__init__(
            public_x,
            classes.pop(),
            list(self._clients),
            seed=seed,
            device=device,
            reporter=reporter,
            options=options,
        )
        self.strict = strict
        work = round_work(list(self._clients.values()), public_x)
        self.workers = min(
            resolve_workers(
                options.workers, len(ids), threads=options.worker_threads, data_values=work
            ),
            len(ids),
        )
        self._pool = (
            WorkerPool(
                list(self._clients.values()),
                self.workers,
                threads=options.worker_threads,
                devices=options.worker_devices,
                public_x=public_x,
            )
            if self.workers > 1
            else None
        )

    def sync_clients(self) -> None:
        """Copy the workers' learners (and model slots) into the clients, e.g. for a checkpoint."""
        if self._pool is None:
            return
        for cid, (learner, slots) in self._pool.learners().items():
            self._clients[cid].learner = learner
            self._clients[cid].slots = slots

    def close(self) -> None:
        """Stop worker processes (if any), first copying their learners into the clients."""
        if self._pool is None:
            return
        try:
            self.sync_clients()
        except RuntimeError as err:  # a dead worker: keep the error that stopped the run
            self.reporter.log(f"could not copy learners back from the workers: {err}")
        finally:
            self._pool.close()
            self._pool = None

    # -- Federation --------------------------------------------------------------------------
    @property
    def client_ids(self) -> list[int]:
        return list(self._clients)

    def map_public(
        self, fn: Callable[[np.ndarray, Item], Result], items: Sequence[Item]
    ) -> list[Result]:
        """`[fn(public_x, item) for item in items]`: in the worker processes when there are any
        and server models live on the CPU (each item wholly in one worker, one thread, so the
        results are a serial run's with that many threads), else here in order."""
        if self._pool is None or self._device != "cpu" or len(items) < 2:
            return [fn(self._public_x, item) for item in items]
        return self._pool.map(fn, items)

    def use_handlers(self, handlers: ClientHandlers) -> None:
        """Serve every client's tasks with `handlers` (run_round gives the algorithm's)."""
        for client in self._clients.values():
            client.handlers = handlers
        if self._pool is not None:
            self._pool.use_handlers(handlers)

    def _deliver(
        self,
        step: Step,
        messages: dict[int, protocol.Message],
        crashed: dict[int, protocol.Reply],
    ) -> dict[int, protocol.Reply]:
        """Ask each client, in this process or in the workers (which answer concurrently);
        the replies are then taken in client order, exactly as in the serial loop."""
        delivered = self._pool.handle(messages) if self._pool is not None else None
        for cid in sorted([*messages, *crashed]):
            if cid in crashed:
                reply = crashed[cid]
            elif delivered is not None:
                reply = delivered[cid]
            else:
                reply = self._clients[cid].handle(messages[cid])
            self._accept(step, cid, reply)
        self._close(step)
        return dict(sorted(step.replies.items()))

    def _check_reply(self, cid: int, task: str, reply: Any) -> None:
        """`strict`: an exception in client code stops the run with its traceback."""
        if self.strict and _raised(reply):
            err = ClientError(
                f"round {self._round}: client {cid} failed task {task!r}: "
                f"{reply.error}\n--- client traceback ---\n{reply.traceback}"
                "(run with strict=False to exclude failing clients instead)"
            )
            err.client_id, err.task = cid, task
            err.error, err.client_traceback = str(reply.error), str(reply.traceback)
            raise err

    def _byzantine(self, cid: int, task: str) -> bool:
        """Whether `cid`'s answer to `task` was falsified by the fault injector."""
        return (
            self.faults is not None
            and task == protocol.PREDICT_PUBLIC
            and cid in self.faults.byzantine
        )

    def _rejected_reply(self, cid: int, task: str, reason: str, fault: str | None) -> None:
        """Raise or warn about a real rejection, as `on_reject` asks; an injected fault's or a
        Byzantine client's reply is only recorded (it is deliberate)."""
        if self.on_reject == "record" or fault is not None or self._byzantine(cid, task):
            return
        text = rejection_message(self._round, cid, task, reason)
        if self.on_reject == "raise":
            raise ClientRejectedError(
                f"{text} (strict=True stops at the first rejected reply; pass strict=False to "
                "exclude the client from the step with a warning instead)",
                round_num=self._round,
                client_id=cid,
                task=task,
                reason=reason,
            )
        warnings.warn(
            f"{text} (strict=False: client {cid} is left out of this step; the run goes on)",
            ClientRejectedWarning,
            stacklevel=4,  # the line that called `send` (the algorithm's step)
        )

    def evaluate_server_models(
        self, models: Mapping[int, Learner], split: str = "test"
    ) -> dict[int, dict[str, float]]:
        return {
            cid: models[cid].evaluate(*self._clients[cid].split(split)) for cid in sorted(models)
        }

    def predict_server_models(
        self, models: Mapping[int, Learner], split: str
    ) -> dict[int, np.ndarray]:
        out = {}
        for cid in sorted(models):
            try:
                x = self._clients[cid].split(split)[0]
            except ValueError:  # no such split (no validation slice): nothing to mix on
                continue
            out[cid] = models[cid].predict_proba(x)
        return out

    # -- running -----------------------------------------------------------------------------
    def _begin_round(self, algorithm: Algorithm) -> None:
        self.use_handlers(handlers_for(algorithm))

    def run(
        self, algorithm: Algorithm, rounds: int, *, start_round: int = 1
    ) -> list[dict[str, Any]]:
        """Rounds `start_round`..`rounds`; returns their records (the lines of metrics.jsonl).
        The experiment layer wraps them in a `RunResult`."""
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds}")
        records: list[dict[str, Any]] = []
        try:
            with self.reporter.running(rounds):
                for t in range(start_round, rounds + 1):
                    records.append(self.run_round(algorithm, t, rounds))
        finally:
            self.close()
        return records


def rejection_message(round_num: int, cid: int, task: str, reason: str) -> str:
    """What a rejected reply means and what to fix: the client, the task and the reason."""
    if reason.startswith("metric") and "not a finite number" in reason:
        fix = (
            "its training diverged or its learner reports NaN/inf: lower the learning rate, "
            "check its data for NaN/inf, or fix what the learner returns"
        )
    elif reason.startswith("client reported an error"):
        fix = "fix the error in that client's code or data"
    elif re.match(r"array '[^']+\.[^']+'", reason):  # an encoded part, e.g. 'probs.uint8'
        fix = "its payload was damaged in encoding or transport: check the codec"
    elif task == protocol.PREDICT_PUBLIC:
        fix = (
            "its learner's predict_proba must return finite rows of shape (|U|, num_classes) "
            "that are non-negative and sum to 1"
        )
    else:
        fix = f"check what that client's learner returns for {task!r}"
    return f"round {round_num}: client {cid}'s reply to task {task!r} was rejected: {reason}; {fix}"


def _raised(reply: Any) -> bool:
    """Whether `reply` reports an exception in client code (compared as a str only: a reply
    built by user code may hold anything, and `==` on an array is not a bool)."""
    kind = getattr(reply, "error_kind", None) if isinstance(reply, protocol.Reply) else None
    return isinstance(kind, str) and kind == "exception"
