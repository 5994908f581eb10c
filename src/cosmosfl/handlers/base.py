"""`ClientHandlers`: the client side of an algorithm, one handler per task.

As Flower's ClientApp registers a function per message type (`@app.train`), an algorithm's
handler set registers a function per protocol task, together with the typed request it
reads::

    HANDLERS = ClientHandlers("fedprox", base=params.HANDLERS)

    @HANDLERS.handles(ProxTrain)
    def train_local(client: Participant, request: ProxTrain) -> MetricsReply: ...

`serve` decodes a wire `Message` into the registered request type (validating its arrays,
refusing settings the type does not have), calls the handler with the client (its learner,
model slots and private data) and returns the wire `Reply`. An algorithm names its handler set
by reference (`Algorithm.client_handlers = "module:attribute"`), so the algorithm imports no
client code and no torch; engines resolve the reference (`handlers_for`) and give the set to
their clients.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cosmosfl.core import protocol
from cosmosfl.core.tasks import Request, TaskReply

if TYPE_CHECKING:
    from cosmosfl.handlers.participant import Participant

R = TypeVar("R", bound=Request)
Handler = Callable[["Participant", Any], "TaskReply | protocol.Reply"]


class ClientHandlers:
    """The tasks a client serves for one algorithm: task -> (request type, handler).

    `base` is a handler set whose tasks this one starts from (and may replace)."""

    def __init__(self, name: str, base: ClientHandlers | None = None) -> None:
        self.name = name
        self._routes: dict[str, tuple[type[Request], Handler]] = (
            dict(base._routes) if base is not None else {}
        )

    def handles(self, request_type: type[R]) -> Callable[[Callable[[Participant, R], Any]], Any]:
        """Decorator: serve `request_type.task` with the decorated function."""

        def register(handler: Callable[[Participant, R], Any]) -> Callable[[Participant, R], Any]:
            self._routes[request_type.task] = (request_type, handler)
            return handler

        return register

    @property
    def tasks(self) -> list[str]:
        return sorted(self._routes)

    def request_type(self, task: str) -> type[Request]:
        """The typed request the handler of `task` reads."""
        if task not in self._routes:
            raise ValueError(f"task {task!r} is not served by {self.name} clients")
        return self._routes[task][0]

    def serve(self, client: Participant, message: protocol.Message) -> protocol.Reply:
        """Run `message` on `client`; exceptions propagate (`Client.handle` turns them into
        error replies)."""
        request_type = self.request_type(message.task)
        handler = self._routes[message.task][1]
        # n = |U| and m = classes, for requests whose arrays are checked against them.
        context = client.array_context() if message.arrays and request_type.array_specs else {}
        reply = handler(client, request_type.from_message(message, context))
        return reply.to_reply(message.task) if isinstance(reply, TaskReply) else reply

    def __repr__(self) -> str:
        return f"ClientHandlers({self.name!r}, tasks={self.tasks})"


DEFAULT_HANDLERS = "cosmosfl.handlers.default:HANDLERS"
_RESOLVED: dict[str, ClientHandlers] = {}


def resolve_handlers(ref: str | ClientHandlers | None) -> ClientHandlers:
    """The handler set `ref` names: a `ClientHandlers`, "package.module:attribute", or None
    for the model-agnostic handlers (train_local, predict_public, distill, evaluate)."""
    if isinstance(ref, ClientHandlers):
        return ref
    ref = DEFAULT_HANDLERS if ref is None else ref
    if ref not in _RESOLVED:
        module, _, attribute = ref.partition(":")
        found = getattr(importlib.import_module(module), attribute or "HANDLERS", None)
        if not isinstance(found, ClientHandlers):
            raise TypeError(f"client handlers {ref!r} do not name a ClientHandlers object")
        _RESOLVED[ref] = found
    return _RESOLVED[ref]


def handlers_for(algorithm: Any) -> ClientHandlers:
    """The client handlers of an algorithm (instance or class): its `client_handlers`."""
    return resolve_handlers(getattr(algorithm, "client_handlers", None))
