"""`EngineOptions`: how an engine runs a federation, as one value.

The same settings (faults, participation, payload limit, worker processes and their threads)
used to travel as one keyword list through `simulate`, the runner and the Flower ServerApp to
the engines; now they travel as this one frozen object, and both engines read it. The engines'
older keyword arguments still work: `with_keywords` puts the ones a caller gave into the
options (a given keyword wins over the options' field).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cosmosfl.core import protocol
from cosmosfl.engines.faults import FaultConfig, fault_config


@dataclass(frozen=True)
class EngineOptions:
    """How an engine runs a federation (not what it runs: clients, U, seed and device).

    `faults`: seeded fault injection (engines/faults.py), a FaultConfig or a mapping of its
    fields (kept as a FaultConfig), None for none. `min_participation`: a step answered by
    fewer than this fraction of the clients it addressed ends the run (ParticipationError).
    `max_payload_bytes`: a larger reply is rejected and its sender left out of the step.
    `workers`, `threads`, `worker_devices`: the in-process engine's client processes
    (engines/workers.py; "auto": one per usable core), torch threads in each (None: 1, and
    the driving process's own left to experiment/loop.py's `process_threads`), and the devices
    they spread over; the Flower engine's clients run on their own nodes, so it ignores them.
    """

    faults: FaultConfig | Mapping[str, Any] | None = None
    min_participation: float = 0.0
    max_payload_bytes: int = protocol.DEFAULT_MAX_PAYLOAD_BYTES
    workers: int | str = 1
    threads: int | None = None
    worker_devices: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.min_participation <= 1:
            raise ValueError(f"min_participation must lie in [0, 1], got {self.min_participation}")
        # Normalised once here, so that every engine reads a FaultConfig (or None) and a
        # tuple: the object stays immutable after construction.
        object.__setattr__(self, "faults", fault_config(self.faults))
        if self.worker_devices is not None:
            object.__setattr__(self, "worker_devices", tuple(self.worker_devices))

    @property
    def worker_threads(self) -> int:
        """Torch threads in each worker process: `threads`, else 1."""
        return 1 if self.threads is None else self.threads

    @property
    def fault_config(self) -> FaultConfig | None:
        """`faults`, typed as what it is after construction."""
        assert self.faults is None or isinstance(self.faults, FaultConfig)
        return self.faults

    def with_keywords(self, **given: Any) -> EngineOptions:
        """These options with the keyword arguments a caller gave (those not None) put in: how
        the engines and `simulate` keep accepting `workers=...`, `faults=...` and the rest."""
        changes = {k: v for k, v in given.items() if v is not None}
        return dataclasses.replace(self, **changes) if changes else self
