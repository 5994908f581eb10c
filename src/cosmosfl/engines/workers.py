"""Running clients in worker processes: the simulation engine's parallel mode.

Each worker process owns a fixed shard of the clients (client ids dealt round-robin over the
workers in id order) for the whole run, so models and private data cross a process boundary
once, at start, and only protocol messages travel per task. A client's results depend only on
its own seeded learner and the messages it receives, and each worker serves its clients in id
order, so a parallel run gives exactly the records of a serial run with the same number of
threads per process (tested). `devices` spreads workers over accelerators (worker w uses
devices[w % len(devices)]), which is how one machine with several GPUs runs clients
concurrently.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.handlers.base import ClientHandlers


def _place(client: Client, device: str | None) -> None:
    """Move a torch client's model to `device` (other learners are left as they are)."""
    learner = client.learner
    if device is None or not hasattr(learner, "model") or not hasattr(learner, "device"):
        return
    import torch

    learner.device = torch.device(device)
    learner.model = learner.model.to(learner.device)


# Everything crosses the pipe as plain pickle bytes: multiprocessing's own pickler would move
# torch tensors through shared-memory file descriptors, which is fragile and needless here.
def _send(conn: Any, obj: Any) -> None:
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _recv(conn: Any) -> Any:
    return pickle.loads(conn.recv_bytes())


def _serve(conn: Any, shard: bytes, threads: int, device: str | None) -> None:
    import torch

    torch.set_num_threads(threads)
    clients: list[Client] = pickle.loads(shard)
    by_id = {c.id: c for c in clients}
    for c in clients:
        _place(c, device)
    try:
        while True:
            command, payload = _recv(conn)
            if command == "handle":
                _send(
                    conn, ("ok", {cid: by_id[cid].handle(m) for cid, m in sorted(payload.items())})
                )
            elif command == "handlers":  # the running algorithm's client side
                for c in clients:
                    c.handlers = payload
                _send(conn, ("ok", None))
            elif command == "fetch":
                _send(conn, ("ok", {cid: (c.learner, c.slots) for cid, c in by_id.items()}))
            elif command == "close":
                _send(conn, ("ok", None))
                return
    except (EOFError, KeyboardInterrupt):
        return
    except Exception:  # a bug in the worker itself (client errors are replies, not here)
        _send(conn, ("error", traceback.format_exc()))


class WorkerPool:
    """`workers` processes serving `clients`; `handle` delivers one message per client."""

    def __init__(
        self,
        clients: Sequence[Client],
        workers: int,
        *,
        threads: int = 1,
        devices: Sequence[str] | None = None,
    ) -> None:
        if workers < 2:
            raise ValueError(f"a worker pool needs workers >= 2, got {workers}")
        ids = sorted(c.id for c in clients)
        workers = min(workers, len(ids))
        self._owner = {cid: i % workers for i, cid in enumerate(ids)}
        by_id = {c.id: c for c in clients}
        # spawn, not fork: forking a process that has started torch's thread pools can hang.
        ctx = mp.get_context("spawn")
        self._conns, self._procs = [], []
        self._handlers: ClientHandlers | None = None
        for w in range(workers):
            shard = pickle.dumps([by_id[cid] for cid in ids if self._owner[cid] == w])
            device = devices[w % len(devices)] if devices else None
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child, shard, threads, device), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)

    @property
    def workers(self) -> int:
        return len(self._procs)

    def _call(self, w: int, command: str, payload: Any = None) -> None:
        _send(self._conns[w], (command, payload))

    def _result(self, w: int) -> Any:
        try:
            status, value = _recv(self._conns[w])
        except EOFError:
            raise RuntimeError(
                f"worker process {w} died (exit code {self._procs[w].exitcode}); "
                "run with workers: 1 to see the error in-process"
            ) from None
        if status != "ok":
            raise RuntimeError(f"worker process {w} failed:\n{value}")
        return value

    def handle(self, messages: Mapping[int, protocol.Message]) -> dict[int, protocol.Reply]:
        """Every client's reply; workers run concurrently, each in client-id order."""
        unknown = sorted(set(messages) - set(self._owner))
        if unknown:
            raise KeyError(f"message addressed to unknown client {unknown[0]}")
        shards: dict[int, dict[int, protocol.Message]] = {}
        for cid, message in messages.items():
            shards.setdefault(self._owner[cid], {})[cid] = message
        for w, shard in shards.items():
            self._call(w, "handle", shard)
        replies: dict[int, protocol.Reply] = {}
        for w in shards:
            replies.update(self._result(w))
        return replies

    def use_handlers(self, handlers: ClientHandlers) -> None:
        """Serve the workers' clients with `handlers` (sent only when they change)."""
        if handlers is self._handlers:
            return
        for w in range(self.workers):
            self._call(w, "handlers", handlers)
        for w in range(self.workers):
            self._result(w)
        self._handlers = handlers

    def learners(self) -> dict[int, Any]:
        """The clients' (learner, model slots) as they are now in the workers (trained state)."""
        out: dict[int, Any] = {}
        for w in range(self.workers):
            self._call(w, "fetch")
        for w in range(self.workers):
            out.update(self._result(w))
        return out

    def close(self) -> None:
        for w, proc in enumerate(self._procs):
            if proc.is_alive():
                try:
                    self._call(w, "close")
                    self._result(w)
                except (OSError, RuntimeError, EOFError):
                    pass
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
        self._procs, self._conns = [], []
