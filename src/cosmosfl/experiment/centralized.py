"""The `centralized` reference run: one model trained on the pooled private data of all clients.

This is an upper-bound reference for comparisons, NOT a federated method: it pools every
client's private training data in one place, which no federated protocol may do. It therefore
lives in the experiment layer (it needs the clients' data, which algorithms never see) and is
registered as a *reference run* rather than in the algorithm registry (its settings and
`REFERENCE_RUNS` are in references.py; this module runs it). Its records have
exactly the engine's format, so run directories, summaries and reports treat it like any other
run. The public set U is not used (its labels are withheld from everyone).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from cosmosfl.algorithms.base import RoundRecord
from cosmosfl.core.seeds import derive_seed
from cosmosfl.engines.progress import Reporter, SilentReporter
from cosmosfl.engines.record import RoundLog
from cosmosfl.experiment.parts import make_learner
from cosmosfl.experiment.references import REFERENCE_RUNS, Centralized, centralized_architecture
from cosmosfl.experiment.result import RunResult

if TYPE_CHECKING:
    from cosmosfl.experiment.parts import Experiment

__all__ = [  # the settings and REFERENCE_RUNS (references.py) are importable from here too
    "REFERENCE_RUNS",
    "Centralized",
    "centralized_architecture",
    "run_centralized",
    "run_reference",
]

RecordSink = Callable[[dict[str, Any]], None]


def run_reference(
    exp: Experiment,
    rounds: int,
    reporter: Reporter | None = None,
    *,
    on_record: RecordSink | None = None,
) -> RunResult:
    """Run the experiment's reference run: `exp.algorithm` is its settings (REFERENCE_RUNS)."""
    settings = exp.algorithm
    if not isinstance(settings, Centralized):
        raise TypeError(f"{type(settings).__name__} is neither an Algorithm nor a reference run")
    return run_centralized(
        exp,
        rounds,
        reporter,
        pretrain_epochs=settings.pretrain_epochs,
        local_epochs=settings.local_epochs,
        on_record=on_record,
    )


def run_centralized(
    exp: Experiment,
    rounds: int,
    reporter: Reporter | None = None,
    *,
    pretrain_epochs: int | None = None,
    local_epochs: int | None = None,
    on_record: RecordSink | None = None,
) -> RunResult:
    """Train one model on the union of the clients' training data; evaluate it per client.

    Epochs default to the config's algorithm section (`pretrain_epochs`, `local_epochs`, when
    present), else 5 and 5. Each record also names the `architecture` and the pooled
    `train_size`. `on_record` receives every record as soon as its round ends.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    cfg = exp.config
    section = cfg.algorithm
    e0 = int(section.get("pretrain_epochs", 5) if pretrain_epochs is None else pretrain_epochs)
    e = int(section.get("local_epochs", 5) if local_epochs is None else local_epochs)
    reporter = reporter or SilentReporter()
    arch = centralized_architecture(exp.client_models)
    learner = make_learner(
        arch,
        cfg,
        exp.dataset,
        derive_seed(cfg.seed, "centralized"),
        exp.dataset.num_classes,
    )
    x = np.concatenate([c.train[0] for c in exp.clients])
    y = np.concatenate([c.train[1] for c in exp.clients])
    ids = [c.id for c in exp.clients]
    result = RunResult(Centralized.name, Centralized.reported_model)
    with reporter.running(rounds):
        for t in range(1, rounds + 1):
            reporter.round_start(t, rounds)
            seconds: dict[str, float] = {}
            start = time.perf_counter()
            reporter.phase("local_training")
            learner.fit(x, y, epochs=e0 if t == 1 else e)
            seconds["local_training"] = time.perf_counter() - start
            reporter.phase("evaluation")
            mark = time.perf_counter()
            rec = RoundRecord()
            rec.add_metrics("client_model", {c.id: learner.evaluate(*c.test) for c in exp.clients})
            seconds["evaluation"] = time.perf_counter() - mark
            seconds["total"] = time.perf_counter() - start
            info = {"architecture": arch, "train_size": len(y)}
            record = _engine_record(t, rec, info, ids, seconds)
            result.records.append(record)
            if on_record is not None:
                on_record(record)
            reporter.round_end(record)
    return result


def _engine_record(
    round_num: int,
    rec: RoundRecord,
    info: dict[str, Any],
    ids: list[int],
    seconds: dict[str, float],
) -> dict[str, Any]:
    """The engines' record (their one serialiser, `RoundLog`), with zero bytes: nothing crosses
    a network. `seconds` holds the phases and the round's "total"."""
    phases = {k: v for k, v in seconds.items() if k != "total"}
    return RoundLog(
        round_num,
        Centralized.name,
        Centralized.reported_model,
        RoundRecord(rec.accuracy, rec.top5, {**rec.info, **info}),
        bytes_up=dict.fromkeys(ids, 0),
        bytes_down=dict.fromkeys(ids, 0),
        seconds=phases,
        total_seconds=seconds["total"],
        rejected=[],
    ).to_json()
