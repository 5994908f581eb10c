"""The config's `faults:` section on the Flower engine: the ServerApp (`run_on_grid`) over the
real ClientApp (loopback Grid, no Ray) gives the in-process engine's records for the same seed,
field by field, with drop-outs, stragglers, crashes, corrupted payloads and Byzantine clients."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.client_app import make_client_app
from cosmosfl.apps.flower.server_app import run_on_grid
from cosmosfl.engines.faults import LATE
from cosmosfl.engines.progress import SilentReporter
from cosmosfl.engines.simulation import ParticipationError
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.rundir import read_records
from cosmosfl.experiment.runner import run_experiment

from .loopback import LoopbackGrid, ServerGrid
from .test_flower_engine import SMALL, settings_for

FLOWER_ONLY = {"eval_bytes_down", "client_seconds", "round_trips", "missing"}
TIMING = {"seconds"}

# Seed 98 over 4 clients and 2 rounds draws each fault mode once (round, client): corrupt
# (1, 0: inf), dropout (1, 1), crash (2, 2), straggler (2, 3); client 1 is Byzantine and
# answers in round 2.
MIXED = [
    "seed=98",
    "min_participation=0",
    "faults.dropout=0.15",
    "faults.straggler=0.15",
    "faults.crash=0.15",
    "faults.corrupt=0.15",
    "faults.byzantine=0.25",
    "faults.byzantine_mode=flip",
]


def assert_same_records(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    """Flower's records equal the in-process ones key by key, except the wall-clock `seconds`
    and the fields only Flower records. (Key order may differ: metrics that Flower defers are
    filed when the round resolves.)"""
    assert len(ours) == len(theirs)
    for flower, inproc in zip(ours, theirs, strict=True):
        assert set(flower) - FLOWER_ONLY == set(inproc)
        for key in inproc:
            if key not in TIMING:
                assert flower[key] == inproc[key], f"round {inproc['round']}: {key}"
        assert flower["missing"] == []  # injected faults are not network failures


def flower_records(cfg, out) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    grid = LoopbackGrid(make_client_app(settings_for(cfg)), cfg.data.num_clients)
    run_on_grid(ServerGrid(grid), cfg, settings_for(cfg, str(out)), reporter=SilentReporter())
    return read_records(out)


def test_every_fault_mode_on_flower_gives_the_in_process_records(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(None, SMALL + MIXED)
    inproc = run_experiment(cfg, tmp_path / "sim", progress=False).records
    ours = flower_records(cfg, tmp_path / "flower")
    assert_same_records(ours, inproc)
    faults = {(f["client"], f["fault"]) for r in ours for f in r["faults"]}
    assert {mode for _, mode in faults} == {"dropout", "straggler", "crash", "corrupt"}
    assert all(r["byzantine"] == [1] for r in ours)
    reasons = " | ".join(e["reason"] for r in ours for e in r["rejected"])
    assert LATE in reasons and "InjectedCrash" in reasons and "non-finite" in reasons
    assert ours[0]["bytes_up"]["1"] == ours[0]["bytes_down"]["1"] == 0  # dropped out


@pytest.mark.parametrize(
    ("name", "faults"),
    [
        # hard labels: 3 corrupted label sets rejected, client 0's random labels accepted
        ("fedct", ["seed=3", "faults.corrupt=0.3", "faults.byzantine=0.25"]),
        # weights: 2 stragglers' and 2 corrupt clients' weights are not averaged
        ("fedavg", ["seed=2", "faults.straggler=0.3", "faults.corrupt=0.3"]),
    ],
)
def test_baselines_under_faults_on_flower_give_the_in_process_records(
    tmp_path, name, faults
) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(
        None,
        [
            *SMALL[:4],
            "clients.models={mlp: 1.0}",
            f"algorithm.name={name}",
            "algorithm.pretrain_epochs=1",
            "algorithm.local_epochs=1",
            "min_participation=0",
            *faults,
        ],
    )
    inproc = run_experiment(cfg, tmp_path / "sim", progress=False).records
    ours = flower_records(cfg, tmp_path / "flower")
    assert_same_records(ours, inproc)
    assert sum(len(r["rejected"]) for r in ours) >= 3


def test_too_few_answers_stop_both_engines_with_the_same_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(None, [*SMALL, "faults.dropout=0.6", "min_participation=0.5"])
    with pytest.raises(ParticipationError) as inproc:
        run_experiment(cfg, tmp_path / "sim", progress=False)
    with pytest.raises(ParticipationError) as flower:
        flower_records(cfg, tmp_path / "flower")
    assert str(flower.value) == str(inproc.value)
    assert "min_participation = 0.5" in str(flower.value)
    assert not (tmp_path / "flower" / "metrics.jsonl").exists()  # round 1 never completed
