"""benchmarks/same_records.py compares records without their timings and names the first
difference (the runs themselves take minutes: run the script, see docs/architecture.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "same_records.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("same_records", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_timings_are_ignored_and_the_first_difference_is_named(tmp_path: Path) -> None:
    same_records = _script()
    base = {"round": 1, "accuracy": {"local": {"0": 0.5, "1": 0.75}}, "seconds": {"total": 1.0}}
    old = _write(tmp_path / "old.jsonl", [base, {**base, "round": 2}])
    slower = {**base, "seconds": {"total": 9.0, "evaluation": 2.0}}
    assert (
        same_records.first_difference(old, _write(tmp_path / "a", [slower, {**slower, "round": 2}]))
        is None
    )
    changed = {**base, "round": 2, "accuracy": {"local": {"0": 0.5, "1": 0.7}}}
    assert same_records.first_difference(old, _write(tmp_path / "b", [base, changed])) == (
        "record 2: accuracy.local.1: old 0.75, new 0.7"
    )
    extra = {**base, "K": 3}
    assert same_records.first_difference(old, _write(tmp_path / "c", [extra, base])) == (
        "record 1: K: only in new (3)"
    )
    assert same_records.first_difference(old, _write(tmp_path / "d", [base])) == (
        "2 records in old, 1 in new"
    )


def test_the_flower_run_is_cosmos_on_a_small_federation_and_ignores_client_seconds(
    tmp_path: Path,
) -> None:
    import argparse

    same_records = _script()
    options = argparse.Namespace(
        config="configs/default.yaml", data_dir=None, set=["seed=3"], new_set=[]
    )
    cfg = same_records._config(same_records.REPO, "flower", 2, options, new=False)
    assert cfg["algorithm"]["name"] == "cosmos" and cfg["rounds"] == 2 and cfg["seed"] == 3
    assert cfg["data"]["num_clients"] == len(cfg["clients"]["models"]) == 4
    assert cfg["algorithm"]["server_model"] == "mlp"
    base = {"round": 1, "round_trips": 3, "client_seconds": {"train_local": {"0": 1.0}}}
    old = _write(tmp_path / "old.jsonl", [base])
    slower = {**base, "client_seconds": {"train_local": {"0": 7.0}}}
    assert same_records.first_difference(old, _write(tmp_path / "a", [slower])) is None
    more_trips = {**base, "round_trips": 4}
    assert same_records.first_difference(old, _write(tmp_path / "b", [more_trips])) == (
        "record 1: round_trips: old 3, new 4"
    )
