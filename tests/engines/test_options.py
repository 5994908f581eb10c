"""EngineOptions: the engine settings as one frozen value, normalised once; the older keyword
arguments of the engines and `simulate` put into it; a config's options (`engine_options`)."""

from __future__ import annotations

import dataclasses

import pytest

from cosmosfl.engines import EngineOptions
from cosmosfl.engines.faults import FaultConfig
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.runner import engine_options, parallelism


def test_defaults_are_the_engines_old_defaults() -> None:
    options = EngineOptions()
    assert options.faults is None and options.min_participation == 0.0
    assert options.workers == options.worker_threads == 1 and options.worker_devices is None
    # threads unset: one per worker, and the driving process's own left to process_threads
    assert options.threads is None and EngineOptions(threads=3).worker_threads == 3


def test_settings_are_normalised_once_and_frozen() -> None:
    options = EngineOptions(faults={"dropout": 0.25}, worker_devices=["cuda:0", "cuda:1"])
    assert options.faults == FaultConfig(dropout=0.25) and options.fault_config is options.faults
    assert options.worker_devices == ("cuda:0", "cuda:1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.workers = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_participation": 1.5}, r"min_participation must lie in \[0, 1\], got 1.5"),
        ({"faults": {"dropout": 2}}, r"faults.dropout = 2 must be a fraction"),
    ],
)
def test_bad_settings_are_refused_with_the_engines_messages(settings, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        EngineOptions(**settings)


def test_given_keywords_win_and_absent_ones_keep_the_options() -> None:
    base = EngineOptions(workers=4, threads=2, min_participation=0.5)
    assert base.with_keywords(workers=None, faults=None) is base
    changed = base.with_keywords(workers=2, max_payload_bytes=100)
    assert (changed.workers, changed.threads, changed.min_participation) == (2, 2, 0.5)
    assert changed.max_payload_bytes == 100


def test_a_configs_engine_options() -> None:
    cfg = load_config(
        None, ["workers=3", "faults.dropout=0.1", "min_participation=0.3", "max_payload_bytes=99"]
    )
    options = engine_options(cfg)
    assert options == EngineOptions(
        faults=cfg.faults,
        min_participation=0.3,
        max_payload_bytes=99,
        workers=3,
        threads=parallelism(cfg)[1] or 1,
    )
    assert options.threads == 1  # workers != 1 and threads unset: one each
