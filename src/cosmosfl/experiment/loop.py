"""The one run loop: build -> preflight -> rounds -> summary.

As in Flower's `Strategy.start`, the loop is written once and is visible here; its callers —
`simulate` (inprocess.py), `run_experiment` (runner.py) and through it the Flower ServerApp
(apps/flower/server_app.py) — supply only hooks: how the engine is built, the preflight
check, what happens after each round (`RoundCallback`: the run directory, the checkpoint, the
tracker, the health check) and how the summary is made. The torch threads of the process
that drives a run follow one policy, `process_threads`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Any

import torch

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.engines.base import Engine
from cosmosfl.engines.progress import Reporter
from cosmosfl.engines.simulation import ClientError
from cosmosfl.experiment.result import RunResult


class RoundCallback:
    """A hook of the run loop; each method does nothing unless a subclass says otherwise."""

    def running(self) -> AbstractContextManager[Any]:
        """Held from after the preflight to after the summary (a folder's lock, a tracking
        session); entered in the order the callbacks are given."""
        return nullcontext()

    def round_end(self, round_num: int, result: RunResult, engine: Engine) -> None:
        """After round `round_num`, whose record is `result.records[-1]` (callbacks run in
        the order given)."""

    def run_end(self, result: RunResult, summary: dict[str, Any]) -> None:
        """After the last round and the engine's close, with the summary (which a callback
        may add to; later callbacks see the additions)."""


def run_loop(
    algorithm: Algorithm,
    rounds: int,
    *,
    build_engine: Callable[[], Engine],
    reporter: Reporter,
    preflight: Callable[[], None] | None = None,
    callbacks: Sequence[RoundCallback] = (),
    records: Sequence[dict[str, Any]] = (),
    summarize: Callable[[RunResult], dict[str, Any]] | None = None,
    client_failure: Callable[[ClientError, int], Exception] | None = None,
) -> RunResult:
    """Run `algorithm` to round `rounds`: check, build the engine, run the rounds, summarise.

    `records`: the rounds done already (a resumed run starts after them). `preflight` runs
    first, before any callback's `running` and before the engine is built (which may start
    worker processes). `client_failure` turns a
    client's exception in round t into the error the caller raises (the CLI's one line);
    without it the ClientError propagates. With `summarize`, the summary is made after the
    engine is closed, given to every callback's `run_end` and kept in `result.summary`."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    result = RunResult(algorithm.name, algorithm.reported_model, list(records))
    if preflight is not None:
        preflight()
    with ExitStack() as held:
        for callback in callbacks:
            held.enter_context(callback.running())
        engine = build_engine()
        try:
            with reporter.running(rounds):
                for t in range(len(result.records) + 1, rounds + 1):
                    try:
                        record = engine.run_round(algorithm, t, rounds)
                    except ClientError as err:
                        if client_failure is None:
                            raise
                        raise client_failure(err, t) from None
                    result.records.append(record)
                    for callback in callbacks:
                        callback.round_end(t, result, engine)
        finally:
            engine.close()
        if summarize is not None:
            result.summary = summarize(result)
            for callback in callbacks:
                callback.run_end(result, result.summary)
    return result


def process_threads(workers: int | str, threads: int | None) -> int | None:
    """The torch threads of the process that drives a run: `threads` when given; else 1
    whenever client worker processes may run (`workers` not 1, "auto" included, even where it
    resolves to serial), so that a run gives the records of a serial `threads: 1` run on any
    machine; else None (torch's default). A server whose clients run elsewhere (Flower) has
    no workers: pass 1."""
    if threads is not None:
        return threads
    return None if workers == 1 else 1


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """This process's torch threads set to `threads` (None: left as they are) for the block,
    and put back afterwards: runs in one process do not leak it."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
