"""What an algorithm is, and the narrow view of the federation it is given.

An algorithm is a server-side procedure. It never sees client data and never imports an engine:
it talks to clients through `Federation.send` (protocol messages) and asks the engine for the
few things only the engine can do (timing phases, measuring a server model on clients' test
splits). Any engine that implements `Federation` can run any algorithm.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from cosmosfl.core import protocol
from cosmosfl.core.constraints import Constraint, check_instance
from cosmosfl.core.tasks import Evaluate, Request, TrainLocal
from cosmosfl.learners.base import Learner

Replies = Mapping[int, protocol.Reply]
"""What `Federation.send` returns: the validated reply of each client that answered."""

Metrics = Mapping[int, Mapping[str, float]]
"""Per-client scalar metrics (e.g. {"top1": 0.9, "loss": 0.3}) by client id."""

Item = TypeVar("Item")
Result = TypeVar("Result")


class Federation(Protocol):
    """The engine as an algorithm sees it."""

    @property
    def client_ids(self) -> list[int]: ...

    @property
    def num_classes(self) -> int: ...

    @property
    def public_x(self) -> np.ndarray:
        """The shared unlabeled public set U (the server holds it too)."""
        ...

    @property
    def seed(self) -> int: ...

    @property
    def device(self) -> str:
        """Where server-side models should live ("cpu", "cuda", ...)."""
        ...

    def send(
        self,
        messages: Mapping[int, Request | protocol.Message],
        expect: Mapping[str, protocol.ArraySpec] | None = None,
    ) -> Replies:
        """Deliver one request per client (a typed `Request`, or its wire form `Message`);
        return the validated replies of those that answered, by client id.

        Clients whose reply fails validation (or who fail) are absent from the result; the
        engine records why. `expect` overrides the task's default reply specification. An
        engine may wait for the replies only when they are first read (Flower sends several
        steps in one round trip), so read them where they are needed, not sooner.
        """
        ...

    def evaluate_server_models(self, models: Mapping[int, Learner], split: str = "test") -> Metrics:
        """Measure server-side model `models[i]` on client i's test split (or, for model
        selection, its "validation" slice).

        A measurement for reporting (the paper reports h_π(i) on client i's test data), not
        part of the federated protocol: it is not counted as communication.
        """
        ...

    def predict_server_models(
        self, models: Mapping[int, Learner], split: str
    ) -> dict[int, np.ndarray]:
        """Server-side model `models[i]`'s probabilities on client i's `split` rows, as the
        site would compute them holding the model's weights (COSMOS's opt-in `deploy_mix`);
        {} on an engine that cannot ship a server model to its sites."""
        ...

    def map_public(
        self, fn: Callable[[np.ndarray, Item], Result], items: Sequence[Item]
    ) -> list[Result]:
        """`[fn(public_x, item) for item in items]`, computed where the engine computes best
        (the in-process engine's worker processes; in order here otherwise). `fn` must be a
        module-level function whose result depends only on its arguments (an item carries
        its own seeded learner), so where it runs changes no result."""
        ...

    def phase(self, name: str) -> AbstractContextManager[None]:
        """Time (and display) a named phase of the current round."""
        ...

    def log(self, text: str) -> None: ...


@dataclass
class RoundRecord:
    """What an algorithm reports for one round.

    `accuracy[model][client] = top1`, with `model` naming the evaluation point (e.g.
    "cluster_model" for h_π(i), "local" for f^(t,1), "client_model" for f^(t,2)).
    """

    accuracy: dict[str, dict[int, float]] = field(default_factory=dict)
    top5: dict[str, dict[int, float]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    # Metrics not read yet (see DeferredMetrics); `resolve` reads them.
    pending: dict[str, DeferredMetrics] = field(default_factory=dict)
    pending_info: dict[str, DeferredMetrics] = field(default_factory=dict)

    def add_metrics(self, model: str, metrics: Metrics) -> None:
        if isinstance(metrics, DeferredMetrics):
            self.accuracy[model] = {}  # keeps the models in the order they were measured
            self.top5.pop(model, None)
            self.pending[model] = metrics
            return
        self.accuracy[model] = {cid: float(m["top1"]) for cid, m in metrics.items()}
        if any("top5" in m for m in metrics.values()):
            self.top5[model] = {cid: float(m["top5"]) for cid, m in metrics.items() if "top5" in m}

    def add_info(self, key: str, per_client: Metrics) -> None:
        """Per-client scalars (e.g. a task's training losses) under `info[key]`, kept unread
        until `resolve` like `add_metrics`'."""
        if isinstance(per_client, DeferredMetrics):
            self.info[key] = {}  # keeps the keys in the order they were measured
            self.pending_info[key] = per_client
            return
        self.info[key] = {cid: dict(m) for cid, m in sorted(per_client.items())}

    def resolve(self) -> None:
        """Read the metrics kept unread (the engine calls this at the end of the round)."""
        pending, self.pending = self.pending, {}
        for model, metrics in pending.items():
            self.add_metrics(model, dict(metrics.items()))
        order = list(self.accuracy)  # top5 in the order the models were measured
        self.top5 = dict(sorted(self.top5.items(), key=lambda kv: order.index(kv[0])))
        pending_info, self.pending_info = self.pending_info, {}
        for key, per_client in pending_info.items():
            self.add_info(key, dict(per_client.items()))


class DeferredMetrics(Mapping[int, Mapping[str, float]]):
    """Per-client metrics computed when first read (`read` returns them), e.g. from replies
    an engine waits for only when they are read. `RoundRecord` keeps them unread until the
    end of the round, so that measuring costs no round trip of its own."""

    def __init__(self, read: Callable[[], Metrics]) -> None:
        self._read = read
        self._value: Metrics | None = None

    def _data(self) -> Metrics:
        if self._value is None:
            self._value = self._read()
        return self._value

    def __getitem__(self, cid: int) -> Mapping[str, float]:
        return self._data()[cid]

    def __iter__(self) -> Iterator[int]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())


class Algorithm(ABC):
    """A federated procedure. Subclasses are dataclasses whose fields are their hyperparameters."""

    name: ClassVar[str]
    # How reports and plots name it ("COSMOS", "FedAvg"); defaults to `name`.
    display_name: ClassVar[str]
    # The evaluation point reported as "the" accuracy of this algorithm (last round); written
    # into every round record as "primary_model" and into summary.json as "reported_model".
    reported_model: ClassVar[str] = "client_model"
    # Deprecated name of `reported_model`, kept equal to it for code that still reads it.
    primary_model: ClassVar[str] = "client_model"
    # Model-agnostic algorithms must never send model parameters (audited in tests).
    model_agnostic: ClassVar[bool] = True
    # A reference rather than a federated method (`local` never communicates): reports show
    # it after the algorithms and do not test the proposed method against it.
    reference: ClassVar[bool] = False
    # The client side: "module:attribute" of a `cosmosfl.handlers.ClientHandlers` (a reference,
    # so the algorithm imports no client code and no torch), or None for the model-agnostic
    # tasks. Engines give these handlers to the clients before each round.
    client_handlers: ClassVar[Any] = None
    # What values each hyperparameter allows (core/constraints.py), merged with the bases';
    # checked when the algorithm is built and by the config layer before it builds one.
    parameter_constraints: ClassVar[Mapping[str, Constraint]] = {}
    # Deprecated names of settings, {old: new}: the config layer maps an old key to the new one
    # with a DeprecationWarning; the class takes the old name as an `InitVar` (None by
    # default), hands it to `take_renamed` in `__post_init__`, and reads it back through
    # `renamed_setting` (see Ditto's `lam`, now `prox_weight`).
    renamed_parameters: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if "primary_model" in own and "reported_model" not in own:
            warnings.warn(
                f"{cls.__name__}.primary_model is deprecated; name the reported evaluation "
                "point `reported_model` instead",
                DeprecationWarning,
                stacklevel=2,
            )
            cls.reported_model = own["primary_model"]
        cls.primary_model = cls.reported_model
        if "display_name" not in own and "name" in own:
            cls.display_name = cls.name

    def __post_init__(self) -> None:
        """Check the hyperparameters against `parameter_constraints`; subclasses with checks
        that involve several settings call this first."""
        check_instance(self)

    def take_renamed(self, old: str, value: Any) -> None:
        """Set the setting now called `renamed_parameters[old]` from its deprecated name."""
        if value is None:
            return
        new = self.renamed_parameters[old]
        warnings.warn(
            f"{type(self).__name__}({old}=...) is deprecated; use {new}= (same meaning)",
            DeprecationWarning,
            stacklevel=4,  # take_renamed <- __post_init__ <- __init__ <- the caller
        )
        setattr(self, new, value)

    @abstractmethod
    def run_round(self, fed: Federation, round_num: int) -> RoundRecord:
        """Run round `round_num` (1-based) and report its metrics."""

    def epochs_for(self, first_training: bool) -> int:
        """The local-training schedule: E0 (`pretrain_epochs`) for a client's first local
        training, E (`local_epochs`) after. Algorithms that train every client from round 1 on
        pass `round_num == 1`."""
        return int(getattr(self, "pretrain_epochs" if first_training else "local_epochs"))

    def hyperparameters(self) -> dict[str, Any]:
        """The settings this algorithm was created with (not its server state)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]
            if f.init and not callable(getattr(self, f.name))
        }

    def get_state(self) -> dict[str, Any]:
        """Server-side state for checkpoints (cluster models, assignment, ...)."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what `get_state` returned."""


def evaluate_clients(
    fed: Federation, client_ids: list[int] | None = None, split: str = "test"
) -> Metrics:
    """Ask clients to evaluate their own model on their own test split (or "validation")."""
    ids = fed.client_ids if client_ids is None else client_ids
    return reply_metrics(fed.send(dict.fromkeys(ids, Evaluate(split))))


def reply_metrics(replies: Replies) -> Metrics:
    """The scalar metrics of each reply, read from `replies` when first read."""
    return DeferredMetrics(lambda: {cid: dict(r.metrics) for cid, r in replies.items()})


def renamed_setting(old: str, new: str) -> property:
    """A read-only attribute under a setting's deprecated name (set it on the class after
    `@dataclass`, which would take a property in the class body for the InitVar's default)."""

    def read(self: Any) -> Any:
        warnings.warn(
            f"{type(self).__name__}.{old} is deprecated; use {new} (same meaning)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, new)

    return property(read, doc=f"Deprecated name of `{new}`.")


ServerLearnerFactory = Callable[[tuple[int, ...], int, int], Learner]
"""Builds a server-side learner from (input shape of one sample, num_classes, seed)."""


def map_public(
    fed: Federation, fn: Callable[[np.ndarray, Item], Result], items: Sequence[Item]
) -> list[Result]:
    """`fed.map_public(fn, items)`: independent server-side work (e.g. COSMOS's K cluster
    models) where the engine computes best (see `Federation.map_public`)."""
    return list(fed.map_public(fn, items))


def iter_clusters(assignment: Mapping[int, int]) -> Iterator[tuple[int, list[int]]]:
    """Yield (cluster, sorted member ids) in cluster order."""
    for k in sorted(set(assignment.values())):
        yield k, sorted(cid for cid, c in assignment.items() if c == k)


def train_local_with_pretraining(
    fed: Federation, pretrained: set[int], epochs_for: Callable[[bool], int]
) -> Replies:
    """TRAIN_LOCAL for every client: `epochs_for(True)` epochs (E0, `Algorithm.epochs_for`) for
    a client that has not yet finished local training, `epochs_for(False)` for the others.

    In round 1 that is everyone; afterwards it is a client that was offline (or failed) in
    round 1 and answers for the first time: it gets the pre-training it missed instead of
    joining with a barely trained model (whose pseudo-labels would misplace it in the
    clustering). Returns the replies: the caller adds the clients that answered to
    `pretrained` (`pretrained.update(replies)`) once it has read a later step's replies, so
    that an engine that sends several steps at once (Flower) needs no round trip for these.
    """
    messages = {cid: TrainLocal(epochs_for(cid not in pretrained)) for cid in fed.client_ids}
    return fed.send(messages)
