"""RoundLog: one serialiser for the round records of both engines (metrics.jsonl lines)."""

from __future__ import annotations

import json

from cosmosfl.algorithms.base import RoundRecord
from cosmosfl.engines.record import RoundLog


def report() -> RoundRecord:
    rec = RoundRecord()
    rec.add_metrics("local", {0: {"top1": 0.5, "top5": 0.9}, 1: {"top1": 1.0, "top5": 1.0}})
    rec.info["clusters"] = {0: 0, 1: 0}
    rec.info["K"] = 1
    return rec


def log(**extra) -> RoundLog:  # type: ignore[no-untyped-def]
    return RoundLog(
        2, "cosmos", "local", report(), {0: 8, 1: 8}, {0: 4, 1: 4}, {"training": 1.23456}, 2.0,
        [{"client": 1, "task": "distill", "reason": "bad"}], **extra,
    )  # fmt: skip


def test_in_process_record_keys_values_and_order():
    out = log().to_json()
    assert list(out) == [
        "round", "algorithm", "primary_model", "accuracy", "mean_accuracy", "top5",
        "mean_top5", "clusters", "K", "bytes_up", "bytes_down", "seconds", "rejected",
    ]  # fmt: skip
    assert out["accuracy"] == {"local": {"0": 0.5, "1": 1.0}}
    assert out["mean_accuracy"] == {"local": 0.75} and out["mean_top5"] == {"local": 0.95}
    assert out["clusters"] == {"0": 0, "1": 0} and out["bytes_up"] == {"0": 8, "1": 8}
    assert out["seconds"] == {"training": 1.2346, "total": 2.0}
    json.dumps(out)  # JSON-ready
    faulty = log(faults=[{"client": 0, "task": "evaluate", "fault": "dropout"}], byzantine=[1])
    assert list(faulty.to_json())[-3:] == ["rejected", "faults", "byzantine"]


def test_flower_fields_sit_where_the_flower_engine_wrote_them():
    out = log(
        eval_bytes_down={0: 100, 1: 100},
        client_seconds={"train_local": {1: 0.123456, 0: 0.5}},
        round_trips=3,
        missing=[],
    ).to_json()
    assert list(out)[-8:] == [
        "bytes_up", "bytes_down", "eval_bytes_down", "seconds", "client_seconds",
        "round_trips", "rejected", "missing",
    ]  # fmt: skip
    assert out["client_seconds"] == {"train_local": {"0": 0.5, "1": 0.1235}}
