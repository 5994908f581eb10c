"""The one run loop (experiment/loop.py) that `simulate` and `run_experiment` (and through it
the Flower ServerApp) call, its callbacks, the one thread policy, and the config's algorithm
built and checked once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cosmosfl import Client, Cosmos, TorchLearner, simulate
from cosmosfl.algorithms.cosmos import Cosmos as CosmosClass
from cosmosfl.experiment import inprocess, runner
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.loop import RoundCallback, process_threads, run_loop
from cosmosfl.models import build_model

TINY = [
    "threads=1",
    "workers=1",
    "rounds=2",
    "data.num_clients=4",
    "data.num_groups=2",
    "clients.models={mlp: 1.0}",
    "algorithm.pretrain_epochs=1",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
    "algorithm.server_model=mlp",
    "algorithm.target_clusters=2",
]


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[str]:
    calls: list[str] = []

    def spy(algorithm: Any, rounds: int, **kwargs: Any) -> Any:
        calls.append(algorithm.name)
        return run_loop(algorithm, rounds, **kwargs)

    monkeypatch.setattr(module, "run_loop", spy)
    return calls


def _clients(n: int = 3) -> tuple[list[Client], np.ndarray]:
    rng = np.random.default_rng(0)
    clients = []
    for i in range(n):
        x = rng.normal(size=(30, 5)).astype(np.float32)
        y = np.arange(30) % 3
        net = build_model("mlp", in_features=5, num_classes=3, seed=i)
        learner = TorchLearner(net, num_classes=3, seed=i)
        clients.append(Client(i, learner, (x, y), (x[:10], y[:10])))
    return clients, rng.normal(size=(20, 5)).astype(np.float32)


def test_simulate_and_run_experiment_go_through_the_one_loop(monkeypatch, tmp_path):
    simulate_calls = _spy(monkeypatch, inprocess)
    runner_calls = _spy(monkeypatch, runner)
    clients, public_x = _clients()
    algo = Cosmos(pretrain_epochs=1, local_epochs=1, server_epochs=1, distill_epochs=1)
    result = simulate(algo, clients, public_x, rounds=2, seed=1)
    assert simulate_calls == ["cosmos"] and len(result.records) == 2
    assert result.summary is None  # simulate writes no summary.json
    done = runner.run_experiment(load_config(None, TINY), tmp_path / "run", progress=False)
    assert runner_calls == ["cosmos"] and len(done.records) == 2
    assert done.summary is not None and done.summary["seed"] == 1


def test_round_callbacks_run_in_order_after_each_round_and_see_the_summary(tmp_path):
    seen: list[tuple[str, int, int]] = []

    class Note(RoundCallback):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def round_end(self, round_num: int, result: Any, engine: Any) -> None:
            assert result.records[-1]["round"] == round_num
            seen.append((self.tag, round_num, len(result.records)))

        def run_end(self, result: Any, summary: dict[str, Any]) -> None:
            summary[self.tag] = len(result.records)

    result = runner.run_experiment(
        load_config(None, TINY), tmp_path / "run", progress=False, callbacks=[Note("a"), Note("b")]
    )
    assert seen == [("a", 1, 1), ("b", 1, 1), ("a", 2, 2), ("b", 2, 2)]
    # What a callback adds to the summary reaches summary.json (written after it).
    import json

    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.summary is not None and result.summary["a"] == written["b"] == 2


def test_the_configs_algorithm_is_built_once(monkeypatch):
    built: list[int] = []
    original = CosmosClass.__post_init__

    def counting(self: Any, *args: Any) -> None:
        built.append(1)
        original(self, *args)

    monkeypatch.setattr(CosmosClass, "__post_init__", counting)
    cfg = load_config(None, TINY)
    assert len(built) == 1
    first = build_experiment(cfg).algorithm
    second = build_experiment(cfg).algorithm
    assert len(built) == 1  # runs take copies of the checked object, never build it again
    assert first is not second and first is not cfg.algorithm.built
    assert isinstance(first, CosmosClass) and first.server_learner is not None
    assert cfg.algorithm.built.server_learner is None  # the config's own stays as validated
    assert cfg.algorithm["target_clusters"] == first.target_clusters == 2
    with pytest.raises(TypeError):
        cfg.algorithm["lam"] = 1.0  # type: ignore[index]  # read-only: a new section instead


@pytest.mark.parametrize(
    ("workers", "threads", "expected"),
    [(1, None, None), (2, None, 1), ("auto", None, 1), (1, 3, 3), (4, 2, 2)],
)
def test_one_thread_policy(workers: Any, threads: Any, expected: Any) -> None:
    assert process_threads(workers, threads) == expected
    cfg = load_config(
        None, [f"workers={workers}", f"threads={threads}" if threads else "threads=null"]
    )
    assert runner.parallelism(cfg)[1] == expected
