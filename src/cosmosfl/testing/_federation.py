"""The federations `check_algorithm` runs an algorithm on: tiny torch clients, the in-process
engine, and the Flower engine over a Grid that serves its messages in this process."""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.core.tasks import as_message
from cosmosfl.engines.simulation import InProcessEngine
from cosmosfl.experiment.checkpoint import load_checkpoint, save_checkpoint
from cosmosfl.experiment.server_models import provide_server_learner
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import build_model

FederationFactory = Callable[[int], tuple[Sequence[Client], np.ndarray]]
"""seed -> (fresh clients, the public set U): a new federation for every run of a check."""

# Wall-clock fields of a round record; everything else must repeat exactly.
TIMING = frozenset({"seconds", "client_seconds"})


def tiny_federation(seed: int) -> tuple[list[Client], np.ndarray]:
    """Four torch mlp clients of one architecture (so parameter-sharing algorithms run too) on
    8 features and 3 classes, each client favouring one class; U has 18 rows. A round of
    any shipped algorithm on it takes well under a second."""
    m, features, num_clients = 3, 8, 4
    rng = np.random.default_rng(seed)
    prototypes = rng.normal(size=(m, features))

    def draw(n: int, favourite: int | None) -> tuple[np.ndarray, np.ndarray]:
        p = np.full(m, 1 / m) if favourite is None else np.full(m, 0.2 / (m - 1))
        if favourite is not None:
            p[favourite] = 0.8
        labels = rng.choice(m, size=n, p=p)
        x = prototypes[labels] + 0.6 * rng.normal(size=(n, features))
        return x.astype(np.float32), labels.astype(np.int64)

    clients = []
    for i in range(num_clients):
        net = build_model("mlp", in_features=features, num_classes=m, width=0.25, seed=seed + i)
        learner = TorchLearner(net, seed=seed + i, batch_size=8, distill_lr=1e-3)
        clients.append(Client(i, learner, draw(24, i % m), draw(12, i % m)))
    public_x, _ = draw(18, None)
    return clients, public_x


def without_timing(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


class _SpyEngine(InProcessEngine):
    """The in-process engine, noting the task of every message it delivers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tasks: set[str] = set()

    def send(self, messages: Any, expect: Any = None) -> dict[int, protocol.Reply]:
        self.tasks.update(as_message(m).task for m in messages.values())
        return super().send(messages, expect)


@dataclass
class Run:
    """One run on the in-process engine: its records, the tasks it sent and, when asked, the
    checkpoint written after round 1 (loaded back, as `cosmosfl run --resume` reads it)."""

    records: list[dict[str, Any]]
    tasks: set[str]
    client_ids: list[int]
    checkpoint: dict[str, Any] | None = field(default=None, repr=False)


def fresh(template: Algorithm) -> Algorithm:
    """A copy of the settings that has never run, with the server models `simulate` gives."""
    algorithm = copy.deepcopy(template)
    provide_server_learner(algorithm, "cpu")
    return algorithm


def engine_for(clients: Sequence[Client], public_x: np.ndarray, seed: int) -> _SpyEngine:
    # Serial, and a client's exception or refused reply stops the run: a check reports it.
    return _SpyEngine(clients, public_x, seed=seed, workers=1, on_reject="raise")


def run_in_process(
    template: Algorithm, federation: FederationFactory, seed: int, rounds: int, *, pause: bool
) -> Run:
    """`rounds` rounds as `simulate` runs them; with `pause`, a checkpoint after round 1."""
    clients, public_x = federation(seed)
    algorithm = fresh(template)
    engine = engine_for(clients, public_x, seed)
    records: list[dict[str, Any]] = []
    checkpoint = None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for t in range(1, rounds + 1):
            records.append(engine.run_round(algorithm, t, rounds))
            if pause and t == 1:
                with tempfile.TemporaryDirectory(prefix="cosmosfl-check-") as folder:
                    save_checkpoint(folder, 1, algorithm, clients, records, "")
                    checkpoint = load_checkpoint(folder)
    engine.close()
    return Run(records, engine.tasks, [c.id for c in clients], checkpoint)


def run_on_flower(
    template: Algorithm, federation: FederationFactory, seed: int, rounds: int
) -> list[dict[str, Any]]:
    """The same run on the Flower engine (`FlowerFederation`): every message goes through
    Flower's records and cosmosfl's codec to clients served as the ClientApp serves them."""
    from cosmosfl.engines.flower.federation import FlowerFederation
    from cosmosfl.handlers.base import handlers_for

    clients, public_x = federation(seed)
    algorithm = fresh(template)
    grid = _in_process_grid(clients, public_x, handlers_for(algorithm))
    fed = FlowerFederation(
        grid,
        public_x,
        clients[0].num_classes,
        expected_clients=[c.id for c in clients],
        seed=seed,
        discovery_timeout=5.0,
    )
    fed.connect(poll_seconds=0.01)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [fed.run_round(algorithm, t, rounds) for t in range(1, rounds + 1)]


def _in_process_grid(clients: Sequence[Client], public_x: np.ndarray, handlers: Any) -> Any:
    """A Flower `Grid` whose nodes are `clients` in this process: no Ray, no network."""
    from flwr.app import Error, Message
    from flwr.serverapp import Grid
    from flwr.supercore.task_identity import TaskIdentity

    from cosmosfl.apps.flower.client_app import serve
    from cosmosfl.engines.flower import codec

    node_base = 1000  # node ids differ from client ids, as on a real SuperLink

    class InProcessGrid(Grid):
        def __init__(self) -> None:
            # What Flower's runtimes set before a ServerApp creates messages.
            TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
            self.nodes = {node_base + c.id: c for c in clients}
            for client in clients:
                client.public_x = public_x
                client.handlers = handlers

        def set_run(self, run: Any) -> None:
            self._run = run

        @property
        def run(self) -> Any:
            return self._run

        def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # type: ignore[no-untyped-def]
            return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

        def get_node_ids(self) -> list[int]:
            return list(self.nodes)

        def push_messages(self, messages: Any) -> Any:
            raise NotImplementedError("send_and_receive serves every message at once")

        def pull_messages(self, message_ids: Any) -> Any:
            raise NotImplementedError("send_and_receive serves every message at once")

        def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> list[Any]:
            out = []
            for msg in messages:
                client = self.nodes[msg.metadata.dst_node_id]
                try:
                    batch = codec.decode_batch(msg.content)
                    replies = [serve(client, item) for item in batch.items]
                    content = codec.encode_replies(client.id, replies)
                    out.append(Message(content, reply_to=msg))
                except Exception as exc:  # what Flower's runtimes do with a ClientApp's error
                    error = Error(code=2, reason=f"{type(exc).__name__}: {exc}")
                    out.append(Message(error, reply_to=msg))
            return out

    return InProcessGrid()
