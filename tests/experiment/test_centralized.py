"""The centralized reference: one model on the pooled private data, engine-format records."""

import json

import numpy as np
import pytest

from cosmosfl.algorithms.base import RoundRecord
from cosmosfl.engines.simulation import InProcessEngine
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.centralized import (
    _engine_record,
    centralized_architecture,
    run_centralized,
)
from cosmosfl.experiment.config import ConfigError, config_from_dict
from cosmosfl.experiment.runner import run_experiment
from cosmosfl.learners.torch import TorchLearner

TINY = {
    "rounds": 2,
    "threads": 1,
    "data": {"num_clients": 4, "num_groups": 2},
    "clients": {"models": {"mlp": 1}},
}


def tiny(algorithm):
    return config_from_dict({**TINY, "algorithm": algorithm})


def test_config_accepts_centralized_with_its_own_settings_only():
    cfg = tiny({"name": "centralized", "pretrain_epochs": 3})
    assert cfg.algorithm == {"name": "centralized", "pretrain_epochs": 3, "local_epochs": 5}
    with pytest.raises(ConfigError, match=r"algorithm\.lam.*allowed: local_epochs, pretrain"):
        tiny({"name": "centralized", "lam": 1.0})
    with pytest.raises(ConfigError, match="local_epochs must be >= 0"):
        tiny({"name": "centralized", "local_epochs": -1})
    with pytest.raises(ConfigError, match=r"reference runs.*centralized"):
        tiny({"name": "centralised"})


def test_architecture_is_the_most_frequent_torch_model_first_listed_on_ties():
    assert centralized_architecture(["mlp", "cnn", "cnn", "logistic_regression"]) == "cnn"
    names = ["logistic_regression", "cnn", "mlp", "mlp", "cnn", "random_forest"]
    assert centralized_architecture(names) == "cnn"  # 2 each: cnn is listed first
    with pytest.raises(ConfigError, match="needs at least one torch model"):
        centralized_architecture(["logistic_regression", "random_forest"])
    sklearn_only = {**TINY, "clients": {"models": {"logistic_regression": 1}}}
    cfg = config_from_dict({**sklearn_only, "algorithm": {"name": "centralized"}})
    with pytest.raises(ConfigError, match="needs at least one torch model"):
        build_experiment(cfg)  # before any data is loaded or trained


def test_trains_on_the_union_of_client_data_with_the_engines_record_format(monkeypatch):
    cfg = tiny({"name": "centralized", "pretrain_epochs": 2, "local_epochs": 1})
    exp = build_experiment(cfg)
    fits = []
    original = TorchLearner.fit

    def spy(self, x, y, *, epochs=1):
        fits.append((np.asarray(x).copy(), np.asarray(y).copy(), epochs))
        return original(self, x, y, epochs=epochs)

    monkeypatch.setattr(TorchLearner, "fit", spy)
    result = run_centralized(exp, rounds=2)
    # one model, E0 = 2 epochs in round 1, then E = 1: on every client's private data at once
    assert [e for _, _, e in fits] == [2, 1]
    sizes = [len(c.train[1]) for c in exp.clients]
    x, y, _ = fits[0]
    assert len(y) == sum(sizes)
    assert np.array_equal(y, np.concatenate([c.train[1] for c in exp.clients]))
    assert np.array_equal(x, np.concatenate([c.train[0] for c in exp.clients]))
    assert len(y) < len(exp.dataset.y_train)  # the public set U is not used

    # The record layout is the simulation engine's (here: `local` for one round) ...
    local = build_experiment(tiny({"name": "local", "pretrain_epochs": 1}))
    engine = InProcessEngine(local.clients, local.public_x, seed=1)
    engine_record = engine.run_round(local.algorithm, 1, 1)
    rec = result.records[0]
    keys = list(engine_record)
    assert keys[5:] == ["bytes_up", "bytes_down", "seconds", "rejected"]
    assert list(rec) == [*keys[:5], "architecture", "train_size", *keys[5:]]
    # ... with its own facts: no bytes at all, what was trained, on how much
    assert (rec["algorithm"], rec["primary_model"], rec["round"]) == (
        "centralized",
        "client_model",
        1,
    )
    assert rec["train_size"] == sum(sizes) and rec["architecture"] == "mlp"
    assert rec["bytes_up"] == rec["bytes_down"] == {str(i): 0 for i in range(4)}
    assert set(rec["seconds"]) == {"local_training", "evaluation", "total"}
    assert rec["rejected"] == []
    accs = rec["accuracy"]["client_model"]
    assert sorted(accs) == ["0", "1", "2", "3"]
    assert rec["mean_accuracy"]["client_model"] == pytest.approx(np.mean(list(accs.values())))
    assert [r["round"] for r in result.records] == [1, 2]
    assert result.algorithm == "centralized" and result.clusters is None


def test_top5_is_recorded_like_the_engine_does():
    rec = RoundRecord()
    rec.add_metrics("client_model", {0: {"top1": 0.5, "top5": 0.9}, 1: {"top1": 0.7, "top5": 1.0}})
    record = _engine_record(1, rec, {}, [0, 1], {"total": 0.0})
    assert record["top5"] == {"client_model": {"0": 0.9, "1": 1.0}}
    assert record["mean_top5"]["client_model"] == pytest.approx(0.95)
    assert record["mean_accuracy"]["client_model"] == pytest.approx(0.6)


def test_run_experiment_writes_a_centralized_run_directory(tmp_path):
    cfg = tiny({"name": "centralized", "pretrain_epochs": 1, "local_epochs": 1})
    result = run_experiment(cfg, tmp_path / "run", progress=False)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algorithm"] == "centralized" and summary["reported_model"] == "client_model"
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["round"] for line in lines] == [1, 2]
    assert summary["final_round"]["mean_accuracy"]["client_model"] == result.mean_accuracy()
    assert "name: centralized" in (tmp_path / "run" / "config.yaml").read_text()
