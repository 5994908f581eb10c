"""A Grid whose `send_and_receive` polls for replies every 0.25 s instead of Flower's 3 s.

Flower's deployment Grid (`flwr.superlink.grid.http_grid.HttpGrid`, flwr 1.42) pulls replies
and then sleeps 3 s until every reply is in, so each hand-off of a round waits 1.5 s on average
after the last client has answered. A cosmosfl round is 2 such hand-offs; with short client
work that sleep is a visible share of a round. Polling is a `pull_messages` call to the
SuperLink, cheap next to a round, so the adapter polls more often and stops as soon as every
reply is in or `timeout` has passed, exactly as Flower's method does (the same messages and
replies cross the SuperLink; only the wait between pulls changes). 0.25 s is the interval of
Flower's own in-process agent grid. Polling much more often is not free on a small machine:
a trial that also made 10 SuperNodes' SuperExecs poll for tasks every 0.1 s (instead of 1 s)
used 288 s of CPU for 2 digits rounds against 123 s without, on 2 loaded cores, and was
dropped (docs/flower.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from flwr.app import Message
from flwr.serverapp import Grid

PULL_INTERVAL = 0.25
"""Seconds between two pulls while replies are outstanding."""


class PromptGrid(Grid):
    """Delegates everything to `grid`; `send_and_receive` pulls every `pull_interval` s."""

    def __init__(self, grid: Grid, pull_interval: float = PULL_INTERVAL) -> None:
        if not pull_interval > 0:
            raise ValueError(f"pull_interval must be > 0 seconds, got {pull_interval!r}")
        self.grid = grid
        self.pull_interval = float(pull_interval)

    # The abstract interface, delegated unchanged.
    def set_run(self, run: Any) -> None:  # Run; kept loose so flwr's stub churn does not bite
        self.grid.set_run(run)

    @property
    def run(self) -> Any:
        return self.grid.run

    def create_message(self, *args: Any, **kwargs: Any) -> Message:
        return self.grid.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return self.grid.get_node_ids()

    def get_nodes(self) -> Iterable[Any]:
        return self.grid.get_nodes()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self.grid.pull_messages(message_ids)

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Push `messages`, then pull until each has a reply or `timeout` seconds have passed
        (None: wait for every reply; 0: one pull), like Flower's own method."""
        pending = set(self.push_messages(messages))
        deadline = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while True:
            pulled = list(self.pull_messages(pending))
            replies.extend(pulled)
            pending.difference_update(m.metadata.reply_to_message_id for m in pulled)
            if not pending:
                break
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(self.pull_interval, remaining))
            else:
                time.sleep(self.pull_interval)
        return replies

    def __getattr__(self, name: str) -> Any:
        # Anything else a Grid implementation offers (e.g. `close`) reaches the wrapped one.
        if name == "grid":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.grid, name)
