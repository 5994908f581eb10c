"""The cosmosfl ClientApp: serves protocol tasks from a Learner on a Flower SuperNode.

Each message carries a batch of protocol messages, handled in order by `Client.handle` — the
code the in-process engine calls, with the client handlers of the run's algorithm — plus
evaluation-only requests for server models. The client
(its learner, private train/test split and U) is rebuilt from the run's cosmosfl config and the
node's `partition-id`; the learner's state, RNG included, lives in `context.state` between
messages, because the deployment runtime starts a fresh process per message and the simulation
runtime reuses one process for many clients.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from cosmosfl import __version__
from cosmosfl.apps.flower.settings import AppSettings, partition_id
from cosmosfl.client import Client
from cosmosfl.core import protocol
from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.engines.flower import codec
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.handlers.base import ClientHandlers, handlers_for
from cosmosfl.learners.torch import TorchLearner
from cosmosfl.models.registry import build_model

if TYPE_CHECKING:
    from cosmosfl.experiment.sites import Site

STATE_KEY = "cosmosfl.learner"

# Per process: (config text, partition id) -> (client with data and learner, the learner's
# initial state). Never the trained state: that lives in `context.state`.
_CLIENTS: dict[tuple[int | None, str, int], tuple[Client, Any]] = {}
# Per process: config text -> the client handlers of its algorithm.
_HANDLERS: dict[str, ClientHandlers] = {}

ClientHook = Callable[[Client, codec.Item], None]
"""Called before each item is served (tests use it to make a client fail or stall)."""


def load_client(
    settings: AppSettings,
    pid: int,
    cache_dir: str | None = None,
    run_id: int | None = None,
    node_config: Mapping[str, Any] | None = None,
) -> tuple[Client, Any]:
    """(the client for partition `pid`, its learner's initial state).

    Partition mode: built from the config's dataset and seed. Site mode (`sites.public` in the
    config): built from the site the node config names (`site=<file>` or the keys inline; in a
    simulation, the config's `sites.files[pid]`), checked against the run's U and label set
    (SiteRefusedError, PublicSetError). Cached in the process (the simulation runtime reuses
    processes) and on the node's disk (the deployment runtime starts a process per message:
    rebuilding every client from its data each time would cost seconds).
    """
    cfg = settings.experiment_config()
    site = _node_site(cfg, pid, node_config or {})
    # Per run: a client object that served one run keeps more than its learner's state (a
    # reused one made a later run with the same config differ from a fresh one), so a new
    # run in the same process starts from the disk cache's fresh copy.
    key = (run_id, settings.config_text + _site_key(site), pid)
    if key in _CLIENTS:
        return _CLIENTS[key]
    _HANDLERS.setdefault(settings.config_text, _algorithm_handlers(cfg.algorithm["name"]))
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    path = _cache_file(settings.config_text + _site_key(site), pid, cache_dir)
    if path.is_file():
        # Written by this app on this node, in a directory only this user can write, by the
        # same cosmosfl source (the key says so); anything unreadable is rebuilt.
        try:
            entry = torch.load(path, weights_only=False)
            _CLIENTS[key] = (entry["client"], entry["initial"])
            return _CLIENTS[key]
        except Exception:  # a damaged or foreign cache entry is only a miss
            path.unlink(missing_ok=True)
    if not 0 <= pid < cfg.data.num_clients:
        ids = list(range(cfg.data.num_clients))
        raise ValueError(f"partition-id {pid} is not a client of this config (ids {ids})")
    if site is not None:
        client = _site_client(cfg, site, pid)
    else:
        from cosmosfl.experiment.build import build_experiment

        # Only this node's partition: its private data, its test split and U, nobody else's.
        exp = build_experiment(cfg, clients=[pid])
        client = exp.clients[0]
        client.public_x = exp.public_x
    initial = client.get_state()
    _CLIENTS[key] = (client, initial)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save({"client": client, "initial": initial}, tmp)
    os.replace(tmp, path)
    return client, initial


def _node_site(cfg: Any, pid: int, node_config: Mapping[str, Any]) -> Site | None:
    """The site this node serves in site mode (None in the partition mode)."""
    from cosmosfl.experiment.sites import config_sites, site_from_node_config

    if cfg.sites.public is None:
        return None
    site = site_from_node_config({**node_config, "partition-id": pid})
    if site is not None:
        return site
    if cfg.sites.files:  # a simulation on one machine: the config lists every site
        return config_sites(cfg)[pid]
    raise ConfigError(
        "this run's sites bring their own data, and this SuperNode names no site: start it "
        "with --node-config 'site=/path/to/site.yaml' (docs/tutorials/organisations.md)"
    )


def _site_client(cfg: Any, site: Site, pid: int) -> Client:
    """The site's client: its own file, its model, its copy of U checked against the run's."""
    from cosmosfl.data.public import load_public
    from cosmosfl.experiment.sites import build_site_client, public_path

    if not cfg.sites.labels:
        raise ConfigError("a run of sites needs its label set: sites.labels in the run config")
    public = load_public(
        site.public or public_path(cfg),
        sha256=cfg.sites.public_sha256,
        label_column=cfg.sites.label_column,
        missing=cfg.data.missing,
        who=f"site {pid}",
    )
    client, _ = build_site_client(cfg, site, pid, public, tuple(map(str, cfg.sites.labels)))
    client.site_model = site.model.name  # type: ignore[attr-defined]
    return client


def _site_key(site: Site | None) -> str:
    """What makes a site's cached client stale: its settings and its files' sizes and times."""
    if site is None:
        return ""
    stamp = [
        f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" if p.is_file() else str(p)
        for p in (site.data, site.public)
        if p is not None
    ]
    return f"\nsite {site!r} {stamp}"


def _algorithm_handlers(name: str) -> ClientHandlers:
    from cosmosfl.algorithms.registry import ALGORITHMS

    return handlers_for(ALGORITHMS.get(name))  # reference runs: the model-agnostic tasks


def run_handlers(settings: AppSettings) -> ClientHandlers:
    """The client handlers of the run's algorithm (`algorithm.name` of its config)."""
    if settings.config_text not in _HANDLERS:
        name = settings.experiment_config().algorithm["name"]
        _HANDLERS[settings.config_text] = _algorithm_handlers(name)
    return _HANDLERS[settings.config_text]


def _cache_file(config_text: str, pid: int, cache_dir: str | None) -> Path:
    base = Path(cache_dir or Path(tempfile.gettempdir()) / f"cosmosfl-flower-{os.getuid()}")
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    digest = hashlib.sha256(f"{_source_fingerprint()}\n{config_text}".encode()).hexdigest()[:20]
    return base / f"{digest}-client{pid}.pt"


@functools.cache
def _source_fingerprint() -> str:
    """A hash of this cosmosfl's source: a cached client is a pickle of its classes, so one
    written by another checkout or version (the cache folder is per user, not per checkout)
    must not be read back. Hashing ~1.5 MB of source costs a few milliseconds per process."""
    root = Path(__file__).resolve().parents[2]  # the cosmosfl package
    h = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def save_state(state: RecordDict, learner_state: Any) -> None:
    buffer = io.BytesIO()
    torch.save(learner_state, buffer)
    record = ArrayRecord()
    record["blob"] = Array(np.frombuffer(buffer.getvalue(), dtype=np.uint8).copy())
    state[STATE_KEY] = record


def load_state(state: RecordDict) -> Any | None:
    if STATE_KEY not in state.array_records:
        return None
    blob = state.array_records[STATE_KEY]["blob"].numpy().tobytes()
    # The node's own state, written by this app on this node: not data from the network.
    return torch.load(io.BytesIO(blob), weights_only=False)


def evaluate_server_model(client: Client, item: codec.ServerEval) -> protocol.Reply:
    """h_π(i) on client i's test split (or the split the item names): rebuild the server
    model by registry name."""
    spec = dict(item.spec)
    split = client.split(str(spec.pop("split", "test")))
    net = build_model(str(spec.pop("name")), **spec, seed=0)  # type: ignore[arg-type]
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in item.arrays.items()})
    learner = TorchLearner(net, num_classes=client.num_classes)
    return protocol.Reply(protocol.EVALUATE, metrics=learner.evaluate(*split))


def serve(client: Client, item: codec.Item) -> codec.ItemReply:
    start = time.perf_counter()
    if isinstance(item, codec.ServerEval):
        try:
            reply = evaluate_server_model(client, item)
        except Exception as exc:  # reported to the server, which leaves this client out
            reply = protocol.Reply(
                protocol.EVALUATE, error=f"{type(exc).__name__}: {exc}", error_kind="exception"
            )
        kind = codec.SERVER_EVAL
    else:
        reply, kind = client.handle(item), codec.PROTOCOL
    return codec.ItemReply(kind, reply, time.perf_counter() - start)


def _hello(settings: AppSettings, pid: int, context: Context) -> dict[str, str]:
    """A site's answer to discovery: it builds its client now (so that a different U or a
    label outside the run's set refuses it before any training, with the reason) and names
    its model; the partition mode answers with its id only."""
    if not settings.experiment_config().sites.public:
        return {}
    cache = context.node_config.get("cache-dir")
    try:
        client, _ = load_client(
            settings,
            pid,
            str(cache) if cache else None,
            run_id=context.run_id,
            node_config=context.node_config,
        )
    except (ConfigError, DatasetFormatError, DatasetNotFoundError, ValueError) as err:
        print(f"cosmosfl: site {pid} refuses to join: {err}", file=sys.stderr, flush=True)
        return {"refused": str(err)}
    return {"model": str(getattr(client, "site_model", ""))}


ClientFactory = Callable[[Context], Client]
"""Builds this node's client (learner, private data, test split, `public_x` = U) from the
Flower context, e.g. from files named in `context.node_config`."""


def make_client_app(
    settings: AppSettings | None = None,
    *,
    hook: ClientHook | None = None,
    client_factory: ClientFactory | None = None,
) -> ClientApp:
    """A ClientApp for cosmosfl. The module's `app` builds its client from the run's cosmosfl
    config and the node's partition id; `settings` replace the run config (Python-driven
    simulation); `client_factory` replaces the config-built client with your own (your model,
    your data: its id must be the node's partition id); `hook` is for tests."""
    app = ClientApp()
    fixed = settings
    own: dict[int, tuple[Client, Any]] = {}

    def own_client(context: Context, pid: int) -> tuple[Client, Any]:
        if pid not in own:
            client = client_factory(context)  # type: ignore[misc]
            if client.id != pid or client.public_x is None:
                raise ValueError(
                    f"client_factory must return the client with id {pid} (the partition id) "
                    f"and its public set U attached (public_x); got id {client.id}"
                )
            own[pid] = (client, client.get_state())
        return own[pid]

    @app.query(codec.ACTION)
    def query(msg: Message, context: Context) -> Message:
        settings = fixed or AppSettings.from_run_config(context.run_config)
        pid = partition_id(context.node_config)
        batch = codec.decode_batch(msg.content)
        replies = []
        if not batch.items:  # the server's discovery: it needs `pid` (and a site's model)
            hello = {} if client_factory is not None else _hello(settings, pid, context)
            return Message(codec.encode_replies(pid, [], hello), reply_to=msg)
        if client_factory is not None:
            client, initial = own_client(context, pid)
        else:
            cache = context.node_config.get("cache-dir")
            client, initial = load_client(
                settings,
                pid,
                str(cache) if cache else None,
                run_id=context.run_id,
                node_config=context.node_config,
            )
        client.handlers = run_handlers(settings)
        saved = load_state(context.state)
        client.set_state(copy.deepcopy(initial) if saved is None else saved)
        for item in batch.items:
            if hook is not None:
                hook(client, item)
            replies.append(serve(client, item))
        save_state(context.state, client.get_state())
        return Message(codec.encode_replies(pid, replies), reply_to=msg)

    return app


app = make_client_app()
