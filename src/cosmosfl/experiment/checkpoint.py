"""Checkpoints: everything a run needs to continue after its last complete round.

At the end of every round the runner saves the algorithm's server state, every client's state
(its learner, including the learner's own RNG), the global RNG states and the metrics so far,
to `checkpoint.pt` in the run directory. The file is written to a temporary name, flushed to
disk, then renamed over the previous checkpoint, so a crash at any moment leaves either the
old or the new checkpoint, never a torn one. A Ctrl-C during the write is held until the write
has finished.

Checkpoints are pickles (scikit-learn estimators do not serialise otherwise): load only run
directories you made yourself.
"""

from __future__ import annotations

import os
import random
import signal
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.client import Client
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.rundir import CHECKPOINT

FORMAT = 1
# Test-only: "kill-before-rename:R" dies (SIGKILL) after the temporary file of round R is
# written and before it replaces the previous checkpoint; "pause-after:R" sleeps after the
# checkpoint of round R is in place, so a test can kill the process at a known round.
HOOK_ENV = "COSMOSFL_TEST_CHECKPOINT_HOOK"


class CheckpointError(ConfigError):
    """A run directory cannot be resumed (no checkpoint, unreadable, or another config)."""


def rng_states() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C that arrives during the block and raise it once the block is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda *a: pending.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt


def _hook(event: str, round_num: int) -> None:
    action, _, when = os.environ.get(HOOK_ENV, "").partition(":")
    if not when or int(when) != round_num:
        return
    if action == "kill-before-rename" and event == "written":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "pause-after" and event == "committed":
        while True:
            time.sleep(1)


def save_checkpoint(
    run_dir: str | Path,
    round_num: int,
    algorithm: Algorithm,
    clients: Sequence[Client],
    records: list[dict[str, Any]],
    config_text: str,
) -> Path:
    """Atomically replace `run_dir/checkpoint.pt` with the state after round `round_num`."""
    state = {
        "format": FORMAT,
        "round": int(round_num),
        "config": config_text,
        "algorithm": algorithm.name,
        "algorithm_state": algorithm.get_state(),
        "clients": {c.id: c.get_state() for c in clients},
        "rng": rng_states(),
        "records": list(records),
    }
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / CHECKPOINT
    with _sigint_deferred():
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{CHECKPOINT}.")
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            _hook("written", round_num)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(directory)
    _hook("committed", round_num)
    return target


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (where the platform allows opening a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_checkpoint(run_dir: str | Path) -> dict[str, Any]:
    """The last complete checkpoint of a run directory, or a CheckpointError saying why not."""
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(
            f"{run_dir} has no {CHECKPOINT}: no round of that run completed, so there is nothing "
            "to resume; start it again with `cosmosfl run`"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # a checkpoint written by this module is never torn; say so
        raise CheckpointError(f"{path} cannot be read ({type(err).__name__}: {err})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a cosmosfl checkpoint of format {FORMAT}")
    return state


def restore(
    state: dict[str, Any], algorithm: Algorithm, clients: Sequence[Client]
) -> list[dict[str, Any]]:
    """Load a checkpoint into a freshly built algorithm and clients; return the records so far."""
    if state["algorithm"] != algorithm.name:
        raise CheckpointError(
            f"the checkpoint is of algorithm {state['algorithm']!r}, the config runs "
            f"{algorithm.name!r}"
        )
    saved = state["clients"]
    ids = sorted(c.id for c in clients)
    if sorted(saved) != ids:
        raise CheckpointError(
            f"the checkpoint holds clients {sorted(saved)}, the config builds clients {ids}"
        )
    algorithm.set_state(state["algorithm_state"])
    for client in clients:
        client.set_state(saved[client.id])
    set_rng_states(state["rng"])
    return list(state["records"])
