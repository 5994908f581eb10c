"""A Flower Grid that delivers messages to a ClientApp in this process (no Ray, no network),
with knobs to drop a node's replies (a client that times out) or take a node offline."""

from __future__ import annotations

from collections.abc import Iterable

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

from cosmosfl.apps.flower.grid import PromptGrid

NODE_BASE = 1000


class LoopbackGrid(Grid):
    def __init__(
        self,
        client_app: ClientApp,
        num_nodes: int,
        node_configs: list[dict[str, object]] | None = None,
    ) -> None:
        """`node_configs`: more node-config keys for node i (e.g. the `site` it serves)."""
        # What Flower's runtimes set before a ServerApp creates messages.
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
        self.client_app = client_app
        self.contexts = {
            NODE_BASE + i: Context(
                run_id=1,
                node_id=NODE_BASE + i,
                node_config={
                    "partition-id": i,
                    "num-partitions": num_nodes,
                    **(node_configs[i] if node_configs else {}),
                },
                state=RecordDict(),
                run_config={},
            )
            for i in range(num_nodes)
        }
        self.round = 0  # set by the test's hook to script faults per round
        self.drop: dict[int, set[int]] = {}  # round -> partitions whose replies are lost
        self.offline_from: dict[int, int] = {}  # partition -> first round it is offline
        self.sent: list[Message] = []
        self.replies: list[Message] = []

    def _offline(self, node: int) -> bool:
        pid = node - NODE_BASE
        return pid in self.offline_from and self.round >= self.offline_from[pid]

    # -- Grid ----------------------------------------------------------------------------------
    def set_run(self, run):  # type: ignore[no-untyped-def]
        self._run = run

    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # type: ignore[no-untyped-def]
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return [n for n in self.contexts if not self._offline(n)]

    def push_messages(self, messages):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def pull_messages(self, message_ids):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def send_and_receive(self, messages, *, timeout=None):  # type: ignore[no-untyped-def]
        out = []
        for msg in messages:
            self.sent.append(msg)
            node = msg.metadata.dst_node_id
            if self._offline(node):
                continue
            try:
                reply = self.client_app(msg, self.contexts[node])
            except Exception as exc:  # what Flower's runtimes do with a ClientApp exception
                reply = Message(Error(code=2, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)
            if (node - NODE_BASE) in self.drop.get(self.round, set()):
                continue
            self.replies.append(reply)
            out.append(reply)
        return out


class ServerGrid(PromptGrid):
    """A LoopbackGrid as the ServerApp's `run_on_grid` takes it (it wraps any other Grid in a
    PromptGrid, which polls a SuperLink the loopback does not have)."""

    def send_and_receive(self, messages, *, timeout=None):  # type: ignore[no-untyped-def]
        return self.grid.send_and_receive(messages, timeout=timeout)
