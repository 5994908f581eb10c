"""Experiment tracking: TensorBoard and MLflow receive every round, read back with their own
readers; missing packages and bad settings are one-line errors; tracking is not identity."""

import sys

import pytest

from cosmosfl.engines.progress import Reporter
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.rundir import read_records
from cosmosfl.experiment.runner import resume_experiment, run_experiment
from cosmosfl.experiment.tracking import (
    MlflowTracker,
    TensorBoardTracker,
    Tracker,
    TrackingUnavailable,
    _Guarded,
    make_tracker,
    round_metrics,
)

TINY = [
    "threads=1",
    "data.num_clients=4",
    "data.num_groups=2",
    "clients.models={mlp: 1}",
    "algorithm.target_clusters=2",
    "algorithm.pretrain_epochs=1",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
    "algorithm.server_model=mlp",
]


class StopBefore(Reporter):
    def __init__(self, n):
        self.n = n

    def round_start(self, round_num, rounds):
        if round_num == self.n:
            raise KeyboardInterrupt


def strip(records):
    """Everything a run computed; not the wall-clock seconds."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def scalars(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return acc, {
        tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]
    }


def test_round_metrics_are_the_records_numbers():
    record = {
        "round": 3,
        "mean_accuracy": {"cluster_model": 0.5, "client_model": 0.25},
        "K": 2,
        "bytes_up": {"0": 100, "1": 300},
        "bytes_down": {"0": 10, "1": 10},
        "seconds": {"training": 1.5, "total": 2.0},
        "rejected": [{"client": 1}],
    }
    assert round_metrics(record) == {
        "accuracy/cluster_model": 0.5,
        "accuracy/client_model": 0.25,
        "K": 2.0,
        "bytes_up_per_client": 200.0,
        "bytes_down_per_client": 10.0,
        "seconds/training": 1.5,
        "seconds/total": 2.0,
        "rejected_replies": 1.0,
    }


def test_tensorboard_event_file_holds_every_round(tmp_path):
    pytest.importorskip("tensorboard")
    tb = tmp_path / "tb"
    cfg = load_config(None, [*TINY, "rounds=2", f"tracking.tensorboard={tb}"])
    run_experiment(cfg, tmp_path / "run", progress=False)
    records = read_records(tmp_path / "run")
    acc, got = scalars(tb / "run")  # one subfolder per run, named after its directory
    for model in ("cluster_model", "client_model", "local"):
        expected = [(r["round"], r["mean_accuracy"][model]) for r in records]
        assert got[f"accuracy/{model}"] == [(t, pytest.approx(v)) for t, v in expected]
    assert got["K"] == [(1, 2.0), (2, 2.0)]
    up = [sum(r["bytes_up"].values()) / 4 for r in records]
    assert [v for _, v in got["bytes_up_per_client"]] == pytest.approx(up)
    assert [s for s, _ in got["seconds/total"]] == [1, 2]
    # tracking changes nothing a run computes: the same seed and config give the same records
    untracked = run_experiment(load_config(None, [*TINY, "rounds=2"]), None, progress=False)
    assert strip(untracked.records) == strip(records)
    assert "config" in "".join(acc.Tags()["tensors"])  # the config as text
    # the config as hyperparameters for TensorBoard's HParams dashboard
    plugins = acc.PluginTagToContent("hparams")
    assert "_hparams_/session_start_info" in plugins


def test_tensorboard_after_resume_has_each_round_once(tmp_path):
    pytest.importorskip("tensorboard")
    tb = tmp_path / "tb"
    cfg = load_config(None, [*TINY, "rounds=3", f"tracking.tensorboard={tb}"])
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, tmp_path / "run", progress=StopBefore(3))
    resume_experiment(tmp_path / "run", progress=False)
    records = read_records(tmp_path / "run")
    _, got = scalars(tb / "run")
    expected = [(r["round"], pytest.approx(r["mean_accuracy"]["cluster_model"])) for r in records]
    assert got["accuracy/cluster_model"] == expected
    # a forced rerun replaces the curves instead of drawing a second set over them
    run_experiment(cfg, tmp_path / "run", progress=False, force=True)
    _, got = scalars(tb / "run")
    assert [s for s, _ in got["accuracy/cluster_model"]] == [1, 2, 3]


def test_mlflow_run_read_back_from_a_local_store(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    store = tmp_path / "mlflow.db"
    cfg = load_config(
        None,
        [*TINY, "rounds=2", f"tracking.mlflow={store}", "tracking.experiment=tiny", "seed=3"],
    )
    tracker = make_tracker(cfg.tracking, "my-run", {"grid.cosmos.lam": "5.0"})
    run_experiment(cfg, tmp_path / "run", progress=False, tracker=tracker)
    records = read_records(tmp_path / "run")
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    (run,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "my-run"
    assert run.data.tags["grid.cosmos.lam"] == "5.0"
    assert run.data.params["seed"] == "3" and run.data.params["algorithm.name"] == "cosmos"
    assert run.data.params["data.num_clients"] == "4"
    assert "tracking.mlflow" not in run.data.params  # where it is logged is not a parameter
    history = client.get_metric_history(run.info.run_id, "accuracy/cluster_model")
    assert sorted((m.step, m.value) for m in history) == [
        (r["round"], pytest.approx(r["mean_accuracy"]["cluster_model"])) for r in records
    ]
    assert [m.value for m in client.get_metric_history(run.info.run_id, "K")] == [2.0, 2.0]
    untracked = run_experiment(load_config(None, [*TINY, "rounds=2", "seed=3"]), None,
                               progress=False)  # fmt: skip
    assert strip(untracked.records) == strip(records)
    summary_ari = run.data.metrics.get("adjusted_rand_index")
    assert summary_ari is not None


def test_missing_packages_are_one_line_errors_naming_the_extra(monkeypatch, tmp_path, capsys):
    from cosmosfl.cli.main import main

    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    cfg = load_config(None, ["tracking.mlflow=x.db", "tracking.tensorboard=tb"])
    with pytest.raises(TrackingUnavailable, match=r"pip install 'cosmosfl\[tensorboard\]'"):
        TensorBoardTracker(cfg.tracking.tensorboard, "r", {})
    with pytest.raises(TrackingUnavailable, match=r"pip install 'cosmosfl\[mlflow\]'"):
        MlflowTracker(cfg.tracking, "r", {})
    code = main(["run", "--mlflow", "x.db", "--out", str(tmp_path / "r"), "-q", "rounds=1"])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "r").exists()
    assert err == "cosmosfl: error: tracking.mlflow needs MLflow: pip install 'cosmosfl[mlflow]'\n"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("tracking.wandb=x", r"unknown key\(s\) tracking\.wandb; allowed in tracking"),
        ("tracking.experiment=", "tracking.experiment"),
        ("tracking.tensorboard=3", r"tracking\.tensorboard = 3 must be of type"),
    ],
)
def test_bad_tracking_settings_are_rejected(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_a_local_mlflow_store_must_be_a_db_file(tmp_path):
    pytest.importorskip("mlflow")
    cfg = load_config(None, [f"tracking.mlflow={tmp_path / 'mlruns'}"])
    with pytest.raises(TrackingUnavailable, match=r"a path to a \.db file.*http://host:5000"):
        make_tracker(cfg.tracking, "r")


def test_no_tracking_is_a_no_op_tracker():
    tracker = make_tracker(load_config().tracking, "r")
    assert type(tracker) is not TensorBoardTracker and isinstance(tracker, Tracker)


def test_a_tracker_failing_mid_run_warns_once_and_the_run_goes_on(tmp_path, capsys):
    class Flaky(_Guarded):
        name = "Flaky"

        def __init__(self):
            super().__init__()
            self.calls = 0

        def _log_round(self, record):
            self.calls += 1
            raise ConnectionError("server went away")

        def _finish(self, summary, status):
            self.status = status

    flaky = Flaky()
    cfg = load_config(None, [*TINY, "rounds=2"])
    run_experiment(cfg, tmp_path / "run", progress=False, tracker=flaky)
    assert (tmp_path / "run" / "summary.json").is_file()
    assert flaky.calls == 1  # no further attempts after the failure
    err = capsys.readouterr().err
    assert err.count("warning: Flaky logging failed (ConnectionError: server went away)") == 1
