"""PromptGrid: Flower's send_and_receive contract with a short pull interval."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower import grid as grid_module
from cosmosfl.apps.flower.grid import PromptGrid


class FakeGrid:
    """Replies to message i become available after `ready[i]` pulls; records every call."""

    def __init__(self, ready: list[int]) -> None:
        self.ready = ready
        self.pulls = 0
        self.closed = False

    def push_messages(self, messages: Any) -> list[str]:
        self.pushed = list(messages)
        return [f"m{i}" for i in range(len(self.pushed))]

    def pull_messages(self, message_ids: Any) -> list[Any]:
        self.pulls += 1
        wanted = set(message_ids)
        return [
            SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=f"m{i}"), n=i)
            for i, after in enumerate(self.ready)
            if after == self.pulls and f"m{i}" in wanted
        ]

    def get_node_ids(self) -> list[int]:
        return [7, 8]

    def close(self) -> None:
        self.closed = True


class Clock:
    """time.monotonic / time.sleep stand-ins: sleeping advances the clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(grid_module.time, "monotonic", c.monotonic)
    monkeypatch.setattr(grid_module.time, "sleep", c.sleep)
    return c


def test_returns_every_reply_as_soon_as_the_last_arrives(clock: Clock) -> None:
    fake = FakeGrid(ready=[1, 3, 2])
    replies = PromptGrid(fake).send_and_receive(["a", "b", "c"], timeout=600)
    assert sorted(r.n for r in replies) == [0, 1, 2]
    assert fake.pulls == 3  # stopped at the pull that brought the last reply
    assert clock.sleeps == [0.25, 0.25]  # Flower's own Grid sleeps 3 s here


def test_stops_at_the_timeout_with_the_replies_it_has(clock: Clock) -> None:
    fake = FakeGrid(ready=[1, 10**9])
    replies = PromptGrid(fake, pull_interval=0.5).send_and_receive(["a", "b"], timeout=2.0)
    assert [r.n for r in replies] == [0]
    assert sum(clock.sleeps) == pytest.approx(2.0)
    assert max(clock.sleeps) <= 0.5


def test_timeout_zero_pulls_once(clock: Clock) -> None:
    fake = FakeGrid(ready=[2])
    assert list(PromptGrid(fake).send_and_receive(["a"], timeout=0)) == []
    assert fake.pulls == 1 and clock.sleeps == []


def test_delegates_the_rest_of_the_grid() -> None:
    fake = FakeGrid(ready=[])
    grid = PromptGrid(fake)
    assert list(grid.get_node_ids()) == [7, 8]
    grid.close()  # not part of Grid's interface: reaches the wrapped grid
    assert fake.closed


def test_rejects_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="pull_interval must be > 0"):
        PromptGrid(FakeGrid(ready=[]), pull_interval=0)
