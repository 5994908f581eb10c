"""The Flower engine's replies to a queued step, which resolve when first read
(`LazyReplies`), and a server model packed for evaluation on a client."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from cosmosfl.core import protocol
from cosmosfl.engines.base import Step
from cosmosfl.engines.flower import codec
from cosmosfl.learners.base import Learner
from cosmosfl.models.registry import build_spec


class _Flushes(Protocol):
    def flush(self) -> None: ...


class LazyReplies(Mapping[int, protocol.Reply]):
    """The replies to a queued step, as `send` returns them: the first read sends the queue
    and waits (one round trip for every step queued since the last), later reads are free.
    An algorithm reads them like any engine's replies; only the round trips differ."""

    def __init__(self, fed: _Flushes, step: Step) -> None:
        self._fed, self._step = fed, step

    def _data(self) -> dict[int, protocol.Reply]:
        if not self._step.done:
            self._fed.flush()
        return dict(sorted(self._step.replies.items()))

    def __getitem__(self, cid: int) -> protocol.Reply:
        return self._data()[cid]

    def __iter__(self) -> Iterator[int]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())


def server_eval_item(learner: Learner, split: str = "test") -> codec.ServerEval | None:
    model = learner.model if learner.capabilities.torch_model else None
    spec = build_spec(model) if model is not None else None
    if spec is None:
        return None
    if split != "test":
        spec = {**spec, "split": split}
    arrays = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}  # type: ignore[union-attr]
    return codec.ServerEval(spec, arrays)
