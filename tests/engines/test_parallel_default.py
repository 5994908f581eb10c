"""`workers: auto` (the default): a run's records are those of a serial `threads: 1` run at any
worker count, COSMOS's cluster models included, and the header says what auto chose."""

import os

import numpy as np
import pytest

from cosmosfl.engines import workers as workers_module
from cosmosfl.engines.options import EngineOptions
from cosmosfl.engines.workers import WorkerPool, resolve_workers
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.runner import describe_parallelism, parallelism, run_experiment

# Six clients, three clusters: COSMOS trains three server models per round, so with two or
# more workers they are distilled in the workers.
TINY = [
    "rounds=2",
    "data.num_clients=6",
    "clients.models={mlp: 0.5, logistic_regression: 0.5}",
    "algorithm.target_clusters=3",
    "algorithm.pretrain_epochs=2",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
]


def strip(records):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def run(overrides):
    """The records of a run; `threads` unset unless `overrides` set it (default.yaml has 1)."""
    cfg = load_config("configs/default.yaml", [*TINY, "threads=null", *overrides])
    return strip(run_experiment(cfg, progress=False).records)


def test_records_equal_serial_threads_1_at_any_worker_count(monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)
    serial = run(["workers=1", "threads=1"])
    assert serial[0]["K"] == 3
    assert run(["workers=2"]) == serial  # threads unset: one per process
    monkeypatch.setattr(workers_module, "usable_cores", lambda: 4)
    monkeypatch.setattr(workers_module, "AUTO_MIN_VALUES", 0)  # digits is small: parallel anyway
    assert parallelism(load_config("configs/default.yaml", TINY))[0] == 4
    assert run([]) == serial  # the default, workers: auto -> 4 here


def square_plus(public_x, item):
    """Module-level, as map_public requires."""
    return float(public_x.sum()) + item * item, os.getpid()


def fail_on_two(public_x, item):
    if item == 2:
        raise ValueError("item two")
    return item


def test_map_runs_in_the_workers_in_order_and_survives_an_error(monkeypatch, request):
    from cosmosfl.client import Client
    from cosmosfl.learners.sklearn import SklearnLearner

    monkeypatch.syspath_prepend(str(request.config.rootpath))  # this module, by name
    from sklearn.linear_model import LogisticRegression

    x, y = np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1])
    clients = [
        Client(i, SklearnLearner(LogisticRegression(), num_classes=2), (x, y), (x, y))
        for i in range(3)
    ]
    public = np.ones((5, 2), np.float32)
    pool = WorkerPool(clients, 2, public_x=public)
    try:
        out = pool.map(square_plus, [0, 1, 2, 3, 4])
        assert [v for v, _ in out] == [10.0, 11.0, 14.0, 19.0, 26.0]
        pids = {pid for _, pid in out}
        assert len(pids) == 2 and os.getpid() not in pids
        with pytest.raises(RuntimeError, match="item two"):
            pool.map(fail_on_two, [0, 1, 2, 3])
        assert pool.map(fail_on_two, [5, 6]) == [5, 6]  # both workers still serve
    finally:
        pool.close()


def test_an_engine_without_workers_maps_in_order_here():
    from cosmosfl.algorithms.base import map_public
    from cosmosfl.engines.base import BaseFederation

    class Bare(BaseFederation):  # no worker processes (e.g. Flower's federation)
        client_ids = (0,)
        _deliver = evaluate_server_models = None  # type: ignore[assignment]

    fed = Bare(
        np.ones((2, 2)), 2, [0], seed=0, device="cpu", reporter=None, options=EngineOptions()
    )
    assert [v for v, _ in map_public(fed, square_plus, [1, 2])] == [5.0, 8.0]


def test_auto_is_serial_for_small_data(monkeypatch):
    from cosmosfl.engines.simulation import InProcessEngine
    from cosmosfl.experiment.build import build_experiment

    monkeypatch.setattr(workers_module, "usable_cores", lambda: 2)
    exp = build_experiment(load_config("configs/default.yaml", TINY))  # digits: 0.2 M values
    engine = InProcessEngine(exp.clients, exp.public_x, workers="auto")
    assert engine.workers == 1
    monkeypatch.setattr(workers_module, "AUTO_MIN_VALUES", 0)
    engine = InProcessEngine(exp.clients, exp.public_x, workers="auto")
    try:
        assert engine.workers == 2
    finally:
        engine.close()


def test_auto_resolves_per_core_and_client(monkeypatch):
    monkeypatch.setattr(workers_module, "usable_cores", lambda: 16)
    assert resolve_workers("auto", 10) == 10
    assert resolve_workers("auto", 40) == 16
    assert resolve_workers("auto", 40, threads=4) == 4
    assert resolve_workers(3, 40) == 3
    assert resolve_workers("auto", 40, data_values=10**5) == 1  # small data: serial
    assert resolve_workers("auto", 40, data_values=10**8) == 16
    monkeypatch.setattr(workers_module, "usable_cores", lambda: 1)
    assert resolve_workers("auto", 40) == 1  # serial on one core
    with pytest.raises(ValueError, match="workers"):
        resolve_workers(0, 4)


def test_header_says_what_auto_chose(monkeypatch):
    monkeypatch.setattr(workers_module, "usable_cores", lambda: 2)
    cfg = load_config("configs/default.yaml", ["threads=null"])
    assert cfg.workers == "auto"
    assert parallelism(cfg) == (2, 1)
    assert describe_parallelism(cfg) == (  # show-config: the data is not loaded
        "workers: auto (2 usable cores, 10 clients) -> up to 2 worker processes "
        "(serial when the work is small), 1 torch thread each"
    )
    assert describe_parallelism(cfg, workers=2) == (  # the run header: the engine's choice
        "workers: auto (2 usable cores, 10 clients) -> 2 worker processes, 1 torch thread each"
    )
    assert "serial in this process (the work is small" in describe_parallelism(cfg, workers=1)
    serial = load_config("configs/default.yaml", ["workers=1", "threads=null"])
    assert parallelism(serial) == (1, None)  # today's serial run: torch's default threads
    assert describe_parallelism(serial).startswith("workers: 1 -> serial in this process")
    with pytest.raises(ConfigError, match="workers = 'many'"):
        load_config("configs/default.yaml", ["workers=many"])


def _refit_federation(learner, clients=21, rows=200, public=1030, features=36, classes=6):
    """Clients of satellite-mixed's size: `rows` private rows each, U of `public` rows."""
    from cosmosfl.client import Client

    rng = np.random.default_rng(0)
    out = []
    for i in range(clients):
        x = rng.normal(size=(rows, features)).astype(np.float32)
        y = rng.integers(0, classes, rows)
        out.append(Client(i, learner(classes), (x, y), (x[:10], y[:10])))
    return out, rng.normal(size=(public, features)).astype(np.float32)


def test_auto_weighs_refit_work_not_bytes(monkeypatch):
    from sklearn.linear_model import LogisticRegression

    from cosmosfl.engines.simulation import InProcessEngine
    from cosmosfl.engines.workers import AUTO_MIN_VALUES, round_work
    from cosmosfl.learners import SklearnLearner, TorchLearner
    from cosmosfl.models import build_model

    monkeypatch.setattr(workers_module, "usable_cores", lambda: 2)

    def refit(m):
        return SklearnLearner(LogisticRegression(random_state=0), num_classes=m)

    def torch(m):
        net = build_model("mlp", in_features=36, num_classes=m, seed=0)
        return TorchLearner(net, num_classes=m)

    clients, public_x = _refit_federation(refit)
    # The bytes alone (private inputs plus U per client) stay under the bar ...
    assert sum(c.train[0].size + public_x.size for c in clients) < AUTO_MIN_VALUES
    # ... the refits over U's soft targets do not: workers pay.
    assert round_work(clients, public_x) > 5 * AUTO_MIN_VALUES
    engine = InProcessEngine(clients, public_x, workers="auto")
    try:
        assert engine.workers == 2
    finally:
        engine.close()
    clients, public_x = _refit_federation(torch)
    assert InProcessEngine(clients, public_x, workers="auto").workers == 1


def test_auto_keeps_the_digits_demo_serial_and_runs_satellite_mixed_in_workers(
    monkeypatch, request
):
    from cosmosfl.engines.simulation import InProcessEngine
    from cosmosfl.experiment.build import build_experiment

    monkeypatch.setattr(workers_module, "usable_cores", lambda: 2)
    monkeypatch.chdir(request.config.rootpath)
    demo = build_experiment(load_config("configs/demo.yaml"))  # 2 logistic regressions
    assert InProcessEngine(demo.clients, demo.public_x, workers="auto").workers == 1
    data = os.environ.get("COSMOSFL_DATA_DIR") or str(
        request.config.rootpath.parent / "shared/data"
    )
    if not os.path.exists(os.path.join(data, "satellite.csv")):
        pytest.skip(f"satellite.csv not found in {data}: the real data folder is absent")
    cfg = load_config("configs/satellite-mixed.yaml", [f"data.data_dir={data}"])
    tabular = build_experiment(cfg)
    engine = InProcessEngine(tabular.clients, tabular.public_x, workers="auto")
    try:
        assert engine.workers == 2
    finally:
        engine.close()


def test_refit_learners_give_serial_records_in_workers(monkeypatch, request):
    pytest.importorskip("xgboost")
    pytest.importorskip("lightgbm")
    monkeypatch.chdir(request.config.rootpath)
    mixed = "clients.models={logistic_regression: 0.34, xgboost: 0.33, lightgbm: 0.33}"
    serial = run([mixed, "workers=1", "threads=1"])
    assert run([mixed, "workers=2"]) == serial
