"""The Flower engine's bookkeeping of one step: which clients a `send` asked and what they
answered (`Ticket`), the replies of a queued request that resolve when first read
(`PendingReplies`), and a server model packed for evaluation on a client."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from cosmosfl.core import protocol
from cosmosfl.engines.flower import codec
from cosmosfl.learners.base import Learner
from cosmosfl.models.registry import build_spec


class _Flushes(Protocol):
    def flush(self) -> None: ...


@dataclass
class Ticket:
    """One `send` (or server evaluation): which clients were asked, and their answers."""

    task: str
    expect: Mapping[str, protocol.ArraySpec] | None
    clients: list[int]
    seq: int = 0  # the order of the steps in a round: rejections are recorded in that order
    faults: dict[int, str] = field(default_factory=dict)  # injected, per client
    replies: dict[int, protocol.Reply] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    done: bool = False


class PendingReplies(Mapping[int, protocol.Reply]):
    """The replies to a queued request; reading them sends the queue and waits."""

    def __init__(self, fed: _Flushes, ticket: Ticket) -> None:
        self._fed, self._ticket = fed, ticket

    def _data(self) -> dict[int, protocol.Reply]:
        if not self._ticket.done:
            self._fed.flush()
        return dict(sorted(self._ticket.replies.items()))

    def __getitem__(self, cid: int) -> protocol.Reply:
        return self._data()[cid]

    def __iter__(self) -> Iterator[int]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())


def server_eval_item(learner: Learner, split: str = "test") -> codec.ServerEval | None:
    model = getattr(learner, "model", None)
    spec = build_spec(model) if model is not None else None
    if spec is None:
        return None
    if split != "test":
        spec = {**spec, "split": split}
    arrays = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}  # type: ignore[union-attr]
    return codec.ServerEval(spec, arrays)
