"""The local deployment launcher's process environment."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")


def test_launched_supernodes_poll_for_tasks_often_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cosmosfl.apps.flower.launch import flower_env

    monkeypatch.delenv("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", raising=False)
    assert flower_env(tmp_path)["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] == "0.1"
    monkeypatch.setenv("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "2")
    assert flower_env(tmp_path)["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] == "2"
