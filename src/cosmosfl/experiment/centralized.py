"""The `centralized` reference run: one model trained on the pooled private data of all clients.

This is an upper-bound reference for comparisons, NOT a federated method: it pools every
client's private training data in one place, which no federated protocol may do. It therefore
lives in the experiment layer (it needs the clients' data, which algorithms never see) and is
registered here as a *reference run* rather than in the algorithm registry. Its records have
exactly the engine's format, so run directories, summaries and reports treat it like any other
run. The public set U is not used (its labels are withheld from everyone).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from cosmosfl.algorithms.base import RoundRecord
from cosmosfl.algorithms.hyperparameters import EpochSchedule
from cosmosfl.core.constraints import check_instance
from cosmosfl.core.seeds import derive_seed
from cosmosfl.engines.progress import Reporter, SilentReporter
from cosmosfl.experiment.build import make_learner
from cosmosfl.experiment.config import ConfigError
from cosmosfl.experiment.result import SimulationResult
from cosmosfl.models.registry import model_names

if TYPE_CHECKING:
    from cosmosfl.experiment.build import Experiment

RecordSink = Callable[[dict[str, Any]], None]


@dataclass
class Centralized(EpochSchedule):
    """Settings of the centralized reference (`algorithm: {name: centralized, ...}`).

    Epochs over the pooled data: `pretrain_epochs` in round 1, `local_epochs` after (the same
    names as COSMOS's E0 and E, so a comparison can give all runs the same training budget).
    """

    name: ClassVar[str] = "centralized"
    display_name: ClassVar[str] = "centralized"
    reported_model: ClassVar[str] = "client_model"
    primary_model: ClassVar[str] = reported_model  # deprecated name of reported_model
    reference: ClassVar[bool] = True  # reported after the algorithms (Algorithm.reference)

    def __post_init__(self) -> None:
        check_instance(self)

    @staticmethod
    def check_clients(client_models: list[str]) -> None:
        """Fail before any work when no client has a torch architecture to train centrally."""
        centralized_architecture(client_models)

    def run(
        self,
        exp: Experiment,
        rounds: int,
        reporter: Reporter | None = None,
        *,
        on_record: RecordSink | None = None,
    ) -> SimulationResult:
        return run_centralized(
            exp,
            rounds,
            reporter,
            pretrain_epochs=self.pretrain_epochs,
            local_epochs=self.local_epochs,
            on_record=on_record,
        )


# Runs that are reported beside the algorithms but are not federated (they may use data no
# protocol could). The config accepts these names in `algorithm.name`; the runner dispatches
# any setting object that is not an `Algorithm` to its `run` method.
REFERENCE_RUNS: dict[str, type[Centralized]] = {Centralized.name: Centralized}


def centralized_architecture(client_models: list[str]) -> str:
    """The most frequent torch architecture among the clients (ties: the first listed)."""
    torch_names = set(model_names())
    counts = Counter(n for n in client_models if n in torch_names)
    if not counts:
        raise ConfigError(
            f"algorithm.name = 'centralized' needs at least one torch model in clients.models, "
            f"got only {sorted(set(client_models))}; allowed: {', '.join(sorted(torch_names))}"
        )
    # Counter keeps first-seen order, and max returns the first of equal counts.
    return max(counts, key=lambda n: counts[n])


def run_centralized(
    exp: Experiment,
    rounds: int,
    reporter: Reporter | None = None,
    *,
    pretrain_epochs: int | None = None,
    local_epochs: int | None = None,
    on_record: RecordSink | None = None,
) -> SimulationResult:
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
    result = SimulationResult(Centralized.name, Centralized.reported_model)
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
    """The simulation engine's record layout, with zero bytes (nothing crosses a network)."""
    record: dict[str, Any] = {
        "round": round_num,
        "algorithm": Centralized.name,
        "primary_model": Centralized.reported_model,
        "accuracy": {m: {str(c): a for c, a in v.items()} for m, v in rec.accuracy.items()},
        "mean_accuracy": {m: float(np.mean(list(v.values()))) for m, v in rec.accuracy.items()},
    }
    if rec.top5:
        record["top5"] = {m: {str(c): a for c, a in v.items()} for m, v in rec.top5.items()}
        record["mean_top5"] = {m: float(np.mean(list(v.values()))) for m, v in rec.top5.items()}
    record.update(info)
    record["bytes_up"] = {str(c): 0 for c in ids}
    record["bytes_down"] = {str(c): 0 for c in ids}
    record["seconds"] = {k: round(v, 4) for k, v in seconds.items()}
    record["rejected"] = []
    return record
