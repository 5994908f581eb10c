"""`simulate`: the one-call Python API, an algorithm over in-memory clients on the in-process
engine, returning a `RunResult`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.client import Client
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.progress import Reporter, make_reporter
from cosmosfl.engines.simulation import InProcessEngine
from cosmosfl.experiment.loop import process_threads, run_loop, torch_threads
from cosmosfl.experiment.preflight import check_federation
from cosmosfl.experiment.result import RunResult
from cosmosfl.experiment.server_models import provide_server_learner
from cosmosfl.learners.device import resolve_device


def simulate(
    algorithm: Algorithm,
    clients: Sequence[Client],
    public_x: np.ndarray,
    *,
    rounds: int = 10,
    seed: int = 0,
    device: str = "cpu",
    progress: bool | Reporter = False,
    strict: bool = True,
    options: EngineOptions | None = None,
    faults: FaultConfig | Mapping[str, Any] | None = None,
    min_participation: float | None = None,
    max_payload_bytes: int | None = None,
    workers: int | str | None = None,
) -> RunResult:
    """Run `algorithm` for `rounds` rounds over in-memory `clients` sharing the public set U.

    Same seed, clients and algorithm settings give the same metrics on CPU.

    Before round 1, `check_federation` (experiment/preflight.py) checks the inputs against U,
    the labels against the learners' num_classes, U itself and the server model on U, without
    training anything: a mistake fails at once with a PreflightError, not after a round.
    `strict` (default) stops the run with a ClientError when a client's code raises and with a
    ClientRejectedError when a client's reply is rejected (probabilities off the simplex, a NaN
    loss, ...), naming the client, the task and the reason; `strict=False` excludes such a
    client from that step with a ClientRejectedWarning instead. `faults` injects seeded
    drop-outs, stragglers, crashes, corrupted payloads and Byzantine clients (a FaultConfig or
    a mapping of its fields); `min_participation` ends the run when fewer clients answer a step.
    `workers` > 1 runs clients (and COSMOS's cluster models) in that many processes, one torch
    thread each and one in this process during the run: the records of a serial run with
    `torch.set_num_threads(1)`; "auto" takes one per usable core, at most one per client,
    serial on one core or for small work (engines/workers.py, `round_work`), one thread
    either way (the clients must pickle, and a script must guard its entry point with
    `if __name__ == "__main__":`, as for any multiprocessing); `options.threads`, when given,
    sets this process's threads too, as `threads` does for `cosmosfl run`
    (`loop.process_threads`, the one policy). The run is `loop.run_loop`, the loop
    `cosmosfl run` and the Flower ServerApp take. An algorithm that trains server models from
    the registry (COSMOS) and has no `server_learner` gets the one its server_* settings
    describe (`server_models.server_models_for`, the rule a loaded config uses too).
    `options` (an `EngineOptions`) gives the engine settings as one value, `threads` and
    `worker_devices` included; `faults`, `min_participation`, `max_payload_bytes` and
    `workers` are the same settings as keywords, which win over `options` where given.
    """
    reporter = progress if isinstance(progress, Reporter) else make_reporter(bool(progress))
    options = (options or EngineOptions()).with_keywords(
        faults=faults,
        min_participation=min_participation,
        max_payload_bytes=max_payload_bytes,
        workers=workers,
    )
    # The server factory on the device the engine will use, before the preflight (which
    # builds a server model) and the engine (which may start worker processes).
    provide_server_learner(algorithm, str(resolve_device(device)))

    def build_engine() -> InProcessEngine:
        torch.manual_seed(seed)  # after the preflight, as for `cosmosfl run`
        return InProcessEngine(
            clients,
            public_x,
            seed=seed,
            device=device,
            reporter=reporter,
            options=options,
            strict=strict,
            on_reject="raise" if strict else "warn",
        )

    with (
        torch_threads(process_threads(options.workers, options.threads)),
        torch.random.fork_rng(devices=[]),  # leave the caller's global RNG as it was
    ):
        return run_loop(
            algorithm,
            rounds,
            build_engine=build_engine,
            reporter=reporter,
            preflight=lambda: check_federation(algorithm, clients, public_x, seed=seed),
        )
