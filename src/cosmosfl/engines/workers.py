"""Running clients in worker processes: the simulation engine's parallel mode.

Each worker process owns a fixed shard of the clients (client ids dealt round-robin over the
workers in id order) for the whole run, so models and private data cross a process boundary
once, at start, and only protocol messages travel per task. A client's results depend only on
its own seeded learner and the messages it receives, and each worker serves its clients in id
order, so a parallel run gives exactly the records of a serial run with the same number of
threads per process (tested). The workers also hold the public set U, so server-side work that
is independent per item (COSMOS's K cluster models) can run there too (`WorkerPool.map`).
`devices` spreads workers over accelerators (worker w uses devices[w % len(devices)]), which is
how one machine with several GPUs runs clients concurrently.

Workers are forked from a `forkserver` process that has imported torch and cosmosfl once: the
first pool of a Python process pays that import (about 2 s), later pools (the next run of a
compare or sweep, a test suite) start in a fraction of a second.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import pickletools
import sys
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.handlers.base import ClientHandlers
from cosmosfl.learners.refit import RefitLearner

AUTO = "auto"


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask: taskset, cgroups' cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


# "auto" stays serial below this much work per round, counted in input values a round's client
# work processes (`round_work`). Which way it goes changes no record (auto runs one torch
# thread per process either way), only time: on scikit-learn's digits (0.3 M values read, two
# of ten clients logistic regressions) two workers gained nothing after their start-up on
# 2 cores, on the CIFAR-10 CPU config (43 M) they made a round 1.29x faster than today's
# serial default (benchmarks/README.md, "Parallel by default"); satellite-mixed's 15 refit
# learners (~11 M) gain from them (benchmarks/README.md, "Tabular rounds").
AUTO_MIN_VALUES = 1_000_000


def round_work(clients: Sequence[Client], public_x: np.ndarray) -> int:
    """Rough input values one round of client work processes: every client reads its private
    inputs and U, and a refit learner (scikit-learn, XGBoost, LightGBM) refits twice on its
    private rows plus U's soft targets (`RefitLearner.refit_work`), which reading alone
    undercounts by the number of classes and more."""
    public_x = np.asarray(public_x)
    features = int(np.prod(public_x.shape[1:])) if public_x.ndim > 1 else 1
    total = 0.0
    for client in clients:
        private = np.asarray(client.train[0])
        total += private.size + public_x.size
        if isinstance(client.learner, RefitLearner):
            total += client.learner.refit_work(len(private), len(public_x), features)
    return int(total)


def resolve_workers(
    workers: int | str, num_clients: int, *, threads: int = 1, data_values: int | None = None
) -> int:
    """The number of worker processes `workers` asks for: an integer as it is, "auto" one per
    usable core (`threads` cores per worker), at most one per client, and 1 (serial) when
    `data_values` (the federation's work per round, `round_work`, when known) is below
    AUTO_MIN_VALUES."""
    if workers == AUTO:
        if data_values is not None and data_values < AUTO_MIN_VALUES:
            return 1
        return max(1, min(usable_cores() // max(int(threads), 1), int(num_clients)))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers = {workers!r}; allowed: an integer >= 1 (1 = serial) or 'auto'")
    return workers


def _context(preload: Sequence[str] = ()) -> Any:
    """forkserver where the platform has it (children fork from a server that imported torch
    and the modules the clients need once, before any torch thread pool exists), else spawn;
    never plain fork: forking a process that has started torch's thread pools can hang. The
    server starts with the first pool of a process; `preload` counts only then."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    # __main__ first, as multiprocessing does by default: a script's main module is run once
    # in the server (guarded by `if __name__ == "__main__"` as for any multiprocessing).
    # torch._dynamo: torch imports it (and sympy, 3 s) lazily at an optimizer's first step.
    ctx.set_forkserver_preload(["__main__", "torch", "torch._dynamo", __name__, *preload])
    return ctx


def _modules_of(data: bytes) -> list[str]:
    """The modules a pickle names (its classes' and functions' homes) that are imported here:
    the workers' parent imports them once instead of every worker on unpickling."""
    names: list[str] = []
    memo: dict[int, Any] = {}
    recent: list[Any] = []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            recent.append(arg)
        elif op.name in ("BINGET", "LONG_BINGET", "GET"):
            recent.append(memo.get(int(arg)))
        elif op.name == "MEMOIZE":
            memo[len(memo)] = recent[-1] if recent else None
        elif op.name == "STACK_GLOBAL" and len(recent) >= 2:
            names.append(str(recent[-2]))
        elif op.name == "GLOBAL":
            names.append(str(arg).split(" ")[0])
        if op.name not in ("MEMOIZE", "FRAME"):
            recent = recent[-2:] if op.name.endswith(("UNICODE", "GET", "UNICODE8")) else []
    return sorted({n for n in names if n in sys.modules and n != "__main__"})


def _place(client: Client, device: str | None) -> None:
    """Move a torch client's model to `device` (other learners are left as they are)."""
    learner = client.learner
    if device is None or not learner.capabilities.torch_model:
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
    clients: list[Client]
    public_x, clients = pickle.loads(shard)
    by_id = {c.id: c for c in clients}
    for c in clients:
        _place(c, device)
    # Every command is answered by its reply, then the warnings it raised (if any), then
    # "end": the parent raises those warnings as its own, so they are shown like warnings of
    # a serial run (one `cosmosfl: warning:` line each on the CLI), not as raw Python ones.
    try:
        while True:
            command, payload = _recv(conn)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                reply = _command(command, payload, public_x, clients, by_id)
            _send(conn, reply)
            if caught:
                _send(conn, ("warnings", [_plain(w) for w in caught]))
            _send(conn, ("end", None))
            if command == "close":
                return
    except (EOFError, KeyboardInterrupt):
        return
    except Exception:  # a bug in the worker itself (client errors are replies, not here)
        _send(conn, ("error", traceback.format_exc()))
        _send(conn, ("end", None))


def _command(
    command: str,
    payload: Any,
    public_x: Any,
    clients: list[Client],
    by_id: dict[int, Client],
) -> tuple[str, Any]:
    """Serve one command: ("ok", result) or ("error", traceback)."""
    if command == "handle":
        return "ok", {cid: by_id[cid].handle(m) for cid, m in sorted(payload.items())}
    if command == "handlers":  # the running algorithm's client side
        for c in clients:
            c.handlers = payload
        return "ok", None
    if command == "map":  # [fn(U, item) for item in items], in order
        fn, items = payload
        try:
            return "ok", [fn(public_x, item) for item in items]
        except Exception:  # the caller raises it; the worker keeps its clients
            return "error", traceback.format_exc()
    if command == "fetch":
        return "ok", {cid: (c.learner, c.slots) for cid, c in by_id.items()}
    if command == "close":
        return "ok", None
    return "error", f"unknown worker command {command!r}"


def _plain(w: warnings.WarningMessage) -> tuple[type[Warning], str, str, int]:
    """A caught warning as plain values that pickle (category, text, file, line)."""
    category = w.category if isinstance(w.category, type) else UserWarning
    try:
        pickle.loads(pickle.dumps(category))
    except Exception:  # a warning class the parent could not import
        category = UserWarning
    return category, str(w.message), str(w.filename), int(w.lineno)


class WorkerPool:
    """`workers` processes serving `clients`; `handle` delivers one message per client."""

    def __init__(
        self,
        clients: Sequence[Client],
        workers: int,
        *,
        threads: int = 1,
        devices: Sequence[str] | None = None,
        public_x: np.ndarray | None = None,
    ) -> None:
        """`public_x`: the public set U the workers keep for `map` (by default the clients'
        own `public_x`, which the engine sets)."""
        if workers < 2:
            raise ValueError(f"a worker pool needs workers >= 2, got {workers}")
        ids = sorted(c.id for c in clients)
        workers = min(workers, len(ids))
        self._owner = {cid: i % workers for i, cid in enumerate(ids)}
        by_id = {c.id: c for c in clients}
        if public_x is None and clients:
            public_x = getattr(clients[0], "public_x", None)
        shards = {
            # U once per worker: pickle shares it with the clients' references to it.
            w: pickle.dumps(
                (public_x, [by_id[cid] for cid in ids if self._owner[cid] == w]),
                protocol=pickle.HIGHEST_PROTOCOL,
            )
            for w in range(workers)
        }
        ctx = _context(_modules_of(shards[0]))
        self._conns, self._procs = [], []
        self._handlers: ClientHandlers | None = None
        self._seen: dict[Any, Any] = {}
        for w in range(workers):
            shard = shards.pop(w)
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
        self._finish(w)
        if status != "ok":
            raise RuntimeError(f"worker process {w} failed:\n{value}")
        return value

    def _finish(self, w: int) -> None:
        """Read the rest of a command's answer: warnings raised in the worker are raised here
        (with their file and line), so they are shown like this process's own."""
        while True:
            try:
                status, value = _recv(self._conns[w])
            except EOFError:
                return
            if status != "warnings":
                return
            for category, text, filename, lineno in value:
                # one registry for the pool: a warning repeated every round is shown once,
                # as the "default" filter shows a serial run's
                warnings.warn_explicit(text, category, filename, lineno, registry=self._seen)

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

    def map(self, fn: Callable[[np.ndarray, Any], Any], items: Sequence[Any]) -> list[Any]:
        """`[fn(U, item) for item in items]`, item i computed by worker i % workers (each in
        item order). `fn` must be a module-level function (it travels by name) whose result
        depends only on its arguments; items and results travel as pickles."""
        jobs: dict[int, list[Any]] = {}
        for i, item in enumerate(items):
            jobs.setdefault(i % self.workers, []).append(item)
        for w, batch in jobs.items():
            self._call(w, "map", (fn, batch))
        done, failure = {}, None
        for w in jobs:  # every reply is read, so the pipes stay in step after a failure
            try:
                done[w] = iter(self._result(w))
            except RuntimeError as err:
                failure = failure or err
        if failure is not None:
            raise failure
        return [next(done[i % self.workers]) for i in range(len(items))]

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
