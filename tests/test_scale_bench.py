"""benchmarks/scale.py reads a cell's events into rounds, cut phases and projections (the
cells themselves take minutes: run the script, see docs/reliability.md, "Scale limits")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scale.py"


@pytest.fixture(scope="module")
def scale():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("scale_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ev(event, t, round_=0, rss=1 << 30, **fields):  # type: ignore[no-untyped-def]
    # CPU seconds at half the wall seconds: the process had half a core
    line = {"event": event, "t": t, "rss": rss, "hwm": rss, "round": round_, "cpu": t / 2}
    return {**line, **fields}


def task(round_, name, s, t=20.5):  # type: ignore[no-untyped-def]
    return {"event": "task", "t": t, "round": round_, "task": name, "s": s, "c": s / 2}


SECONDS = {"local_training": 2.0, "prediction": 1.0, "client_distillation": 10.0, "total": 13.0}


def test_a_finished_round_and_a_round_cut_in_client_distillation(scale):
    events = [
        ev("start", 0.0),
        ev("built", 5.0),
        ev("round_start", 5.0, 1),
        ev("phase", 5.0, 1, name="local_training"),
        ev("round_end", 18.0, 1, rss=3 << 30, seconds=SECONDS, K=5, mean_accuracy={}),
        ev("round_start", 18.0, 2),
        ev("phase", 18.0, 2, name="local_training"),
        ev("phase", 20.0, 2, name="prediction"),
        ev("phase", 21.0, 2, name="evaluation"),
        task(2, "evaluate", 0.4),
        task(2, "evaluate", 0.5),
        ev("phase", 22.0, 2, name="client_distillation"),
        task(2, "distill", 2.0, t=26.0),
    ]
    summary = scale.summarise_cell(events, n=10, u=100)
    assert summary["build_s"] == 5.0
    assert summary["hwm_max"] == 3 << 30
    first, cut = summary["rounds"]
    assert first["complete"] and first["seconds"] == SECONDS and first["K"] == 5
    assert cut["complete"] is False
    assert cut["finished_phases"] == {"local_training": 2.0, "prediction": 1.0, "evaluation": 1.0}
    assert cut["cut_in_phase"] == "client_distillation"
    assert cut["tasks_done_in_cut_phase"] == 1  # the distill tasks after its phase began
    assert cut["cut_phase_elapsed_s"] == 4.0 and cut["mean_task_s"] == 2.0
    # the same on the CPU clock, from the events
    assert first["cpu_seconds"] == {"local_training": 6.5, "total": 6.5}
    assert cut["finished_phases_cpu"] == {
        "local_training": 1.0,
        "prediction": 0.5,
        "evaluation": 0.5,
    }
    assert cut["mean_task_cpu"] == 1.0 and cut["cut_phase_elapsed_cpu"] == 1.0


def test_projection_scales_the_cut_phase_and_adds_phases_not_reached(scale):
    cell = {
        "kind": "train",
        "clients": 10,
        "public": 100,
        "rounds": [
            {
                "round": 1,
                "complete": False,
                "finished_phases": {"local_training": 2.0, "prediction": 1.0},
                "cut_in_phase": "client_distillation",
                "cut_phase_elapsed_s": 4.0,
                "tasks_done_in_cut_phase": 2,
                "mean_task_s": 1.5,
            }
        ],
    }
    rate = dict.fromkeys(scale.UNITS, 0.0)
    rate["server_distillation"] = 0.01  # per sample of U: 1 s here
    # finished 3 s + cut phase 10 clients x 1.5 s + server distillation 1 s
    assert scale.project(cell, rate) == pytest.approx(19.0)
    cpu_cut = {
        **cell["rounds"][0],
        "finished_phases_cpu": {"local_training": 1.0},
        "mean_task_cpu": 0.5,
        "cut_phase_elapsed_cpu": 1.0,
    }
    # 1 s finished + 10 clients x 0.5 s + 1 s server distillation (prediction not reached: 0)
    assert scale.project({**cell, "rounds": [cpu_cut]}, rate, "cpu") == pytest.approx(7.0)
    assert scale.project(cell, rate, "cpu") is None  # no CPU figures recorded
    done = {**cell, "rounds": [{"round": 1, "complete": True, "seconds": SECONDS}]}
    assert scale.project(done, rate) is None  # nothing to project: measured


def test_rates_come_from_the_cell_that_ran_most_of_each_phase(scale):
    small = {
        "kind": "train",
        "cell": "train:10x100",
        "clients": 10,
        "public": 100,
        "rounds": [{"round": 1, "complete": True, "seconds": {**SECONDS, "evaluation": 1.0}}],
    }
    big = {**small, "cell": "train:20x100", "clients": 20}
    cut = {
        **small,
        "cell": "train:99x100",
        "clients": 99,
        "rounds": [
            {
                "round": 1,
                "complete": False,
                "finished_phases": {"local_training": 4.0, "prediction": 9.0, "evaluation": 0.1},
            }
        ],
    }
    tagged = {**big, "cell": "train:500x100", "clients": 500, "tag": "before"}
    rate, source = scale.rates([small, big, cut, tagged])
    assert rate == {} and source == {}  # clustering and two more phases measured nowhere
    for cell in (small, big):
        cell["rounds"][0]["seconds"].update(clustering=0.5, server_distillation=1.0)
    rate, source = scale.rates([small, big, cut, tagged])
    assert source["client_distillation"] == "train:20x100"
    assert rate["client_distillation"] == pytest.approx(10.0 / (20 * 100))
    assert source["prediction"] == "train:99x100"  # a phase the cut cell finished
    assert rate["prediction"] == pytest.approx(9.0 / (99 * 100))
    assert source["evaluation"] == "train:20x100"  # from complete rounds only
    assert source["local_training"] == "train:10x100"  # same units (private samples): first
    assert rate["local_training"] == pytest.approx(2.0 / (scale.MNIST_TRAIN - 100))


def test_train_cells_are_cosmosfl_run_configs(scale):
    from cosmosfl.experiment.config import config_from_dict

    cfg = config_from_dict(scale.train_config(5000, 50_000, "data", 2))
    assert cfg.data.num_clients == 5000 and cfg.rounds == 2 and cfg.threads == 1
    assert cfg.data.public_fraction * scale.MNIST_TRAIN == pytest.approx(50_000)
    assert cfg.data.alpha == 100.0  # 2 private images per client: alpha 5 leaves some empty
    assert config_from_dict(scale.train_config(100, 10_000, "data", 2)).data.alpha == 5.0
