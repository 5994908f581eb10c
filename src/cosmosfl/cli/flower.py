"""`cosmosfl flower app | simulate | local`: run cosmosfl configs on Flower."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cosmosfl.experiment.errors import ConfigError

DESCRIPTION = """Run a cosmosfl config on Flower (needs `pip install 'cosmosfl[flower]'`).

  app       write a Flower app directory (pyproject.toml) for a config, for `flwr run`
  simulate  run the config on Flower's simulation runtime (Ray), in this process
  local     start a SuperLink and one SuperNode per client on 127.0.0.1, run the config,
            and stop every process it started (for testing a deployment on one machine;
            --tls --supernode-auth rehearse a secured one)

All three write the run directory format of `cosmosfl run` (see docs/flower.md)."""


def add_parser(sub: Any, add_config_args: Any) -> None:
    flower = sub.add_parser(
        "flower",
        help="run a config on Flower (app / simulate / local deployment)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fsub = flower.add_subparsers(dest="flower_command", required=True)

    app = fsub.add_parser("app", help="write a Flower app's pyproject.toml for a config")
    add_config_args(app)
    app.add_argument("--dir", "-d", required=True, help="app directory to write")
    app.add_argument("--out", "-o", default="", help="run directory the ServerApp writes")
    _add_timeouts(app)

    sim = fsub.add_parser("simulate", help="run on Flower's simulation runtime (Ray)")
    add_config_args(sim)
    sim.add_argument("--out", "-o", required=True, help="run directory")
    sim.add_argument("--force", action="store_true", help="overwrite a finished run directory")
    sim.add_argument("--num-cpus", type=int, help="CPUs Ray may use (default: all, <= clients)")

    local = fsub.add_parser(
        "local", help="SuperLink + SuperNodes on 127.0.0.1: run, then stop them all"
    )
    add_config_args(local)
    local.add_argument(
        "--site",
        action="append",
        default=[],
        metavar="FILE",
        help="a site file; one SuperNode serves each, in order (site mode: default the "
        "config's sites.files)",
    )
    local.add_argument("--out", "-o", required=True, help="run directory")
    local.add_argument("--force", action="store_true", help="overwrite a finished run directory")
    local.add_argument(
        "--supernodes", type=int, help="SuperNodes to start (default: data.num_clients)"
    )
    local.add_argument("--work", help="folder for logs and Flower state (default: a temp dir)")
    local.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds before the run is abandoned"
    )
    local.add_argument(
        "--tls",
        action="store_true",
        help="TLS on every connection to the SuperLink (throw-away certificates in --work)",
    )
    local.add_argument(
        "--supernode-auth",
        action="store_true",
        help="admit only SuperNodes whose keys were registered (needs --tls)",
    )
    _add_timeouts(local)


def _add_timeouts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reply-timeout", type=float, default=600.0, help="seconds to wait for a reply")
    p.add_argument(
        "--discovery-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for all clients to connect",
    )


def run(args: argparse.Namespace, cfg: Any) -> int:
    from cosmosfl.engines.flower import FLOWER_MISSING, flower_available

    if not flower_available():
        raise ConfigError(FLOWER_MISSING)
    handler = {"app": _app, "simulate": _simulate, "local": _local}[args.flower_command]
    return handler(args, cfg)


def _run_config(args: argparse.Namespace, out: str) -> dict[str, Any]:
    for name in ("reply_timeout", "discovery_timeout"):
        if not getattr(args, name) > 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    return {
        "out": str(Path(out).resolve()) if out else "",
        "force": bool(getattr(args, "force", False)),
        "reply-timeout": float(args.reply_timeout),
        "discovery-timeout": float(args.discovery_timeout),
    }


def _app(args: argparse.Namespace, cfg: Any) -> int:
    from cosmosfl.apps.flower.app import write_app
    from cosmosfl.experiment.sites import shared_config

    shared = shared_config(cfg)  # sites: U's hash and the label set in, no site's file
    path = write_app(args.dir, shared, **_run_config(args, args.out))
    print(f"wrote {path}")
    if shared.sites.public is not None:
        print(
            f"sites: U = {shared.sites.public} (sha256 {shared.sites.public_sha256}), "
            f"{shared.data.num_clients} sites; start each SuperNode with --node-config "
            "'partition-id=<id> site=\"/path/to/site.yaml\"'"
        )
    print(f"run it with: flwr run {args.dir} <superlink connection>  (see docs/flower.md)")
    return 0


def _simulate(args: argparse.Namespace, cfg: Any) -> int:
    from cosmosfl.apps.flower.simulation_runtime import simulate_on_flower
    from cosmosfl.experiment.sites import shared_config

    _refuse_finished(Path(args.out), args.force)
    cfg = shared_config(cfg, keep_files=True)  # simulated nodes read the config's site files
    summary = simulate_on_flower(cfg, args.out, force=args.force, num_cpus=args.num_cpus)
    _print_summary(summary, args.out)
    return 0


def _local(args: argparse.Namespace, cfg: Any) -> int:
    from cosmosfl.apps.flower.app import write_app
    from cosmosfl.apps.flower.launch import LocalDeployment
    from cosmosfl.engines.progress import summary_line
    from cosmosfl.experiment.rundir import RunDirectory, read_summary

    out = Path(args.out).resolve()
    _refuse_finished(out, args.force)
    cfg, node_configs = _local_sites(cfg, args.site)
    nodes = args.supernodes or cfg.data.num_clients
    if node_configs and nodes != len(node_configs):
        raise ConfigError(
            f"--supernodes {nodes}: with sites, one SuperNode serves each site "
            f"({len(node_configs)}); leave --supernodes out"
        )
    if nodes < 1:
        raise ConfigError(f"--supernodes must be >= 1, got {nodes}")
    if args.supernode_auth and not args.tls:
        raise ConfigError("--supernode-auth needs --tls (Flower authenticates SuperNodes over TLS)")
    work = Path(args.work or tempfile.mkdtemp(prefix="cosmosfl-flower-")).resolve()
    app_dir = write_app(work / "app", cfg, **_run_config(args, str(out))).parent
    shown = 0

    def show_progress() -> None:
        nonlocal shown
        metrics = out / "metrics.jsonl"
        lines = metrics.read_text().splitlines() if metrics.exists() else []
        for line in lines[shown:]:
            print(summary_line(json.loads(line)), flush=True)
        shown = max(shown, len(lines))

    start = time.perf_counter()
    deployment = LocalDeployment(
        work,
        nodes,
        tls=args.tls,
        supernode_auth=args.supernode_auth,
        node_configs=node_configs or None,
    )
    try:
        deployment.start()
        run_id = deployment.submit(app_dir)
        print(f"run {run_id} submitted; waiting (Ctrl-C stops everything)", flush=True)
        status = deployment.wait(run_id, args.timeout, on_poll=show_progress)
        show_progress()
    except KeyboardInterrupt:
        print("cosmosfl: interrupted; stopping the SuperLink and SuperNodes", file=sys.stderr)
        return 130
    finally:
        deployment.stop()
    print(f"Flower run {run_id}: {status} in {time.perf_counter() - start:.0f} s (logs: {work})")
    if not status.endswith("completed") or not RunDirectory(out).finished:
        print(f"cosmosfl: the run did not complete; see {work}/superlink.log", file=sys.stderr)
        return 1
    _print_summary(read_summary(out), str(out))
    return 0


def _local_sites(cfg: Any, files: list[str]) -> tuple[Any, list[dict[str, Any]]]:
    """Site mode on one machine: the run config the nodes share (no site files in it) and
    each SuperNode's node config naming its site file; the partition mode as it is."""
    import dataclasses

    from cosmosfl.experiment.sites import config_path, shared_config

    if files and cfg.sites.public is None:
        raise ConfigError("--site needs a config with sites.public (the public set U)")
    if cfg.sites.public is None:
        return cfg, []
    if files:
        sites = dataclasses.replace(cfg.sites, files=list(files))
        data = dataclasses.replace(cfg.data, num_clients=len(files))
        cfg = dataclasses.replace(cfg, sites=sites, data=data)
    if not cfg.sites.files:
        raise ConfigError("site mode on one machine needs the sites: --site FILE, once per site")
    paths = [config_path(cfg, f).resolve() for f in cfg.sites.files]
    shared = shared_config(cfg)
    return shared, [{"site": str(p)} for p in paths]


def _refuse_finished(out: Path, force: bool) -> None:
    """Checked here because the ServerApp runs where its errors become Flower's log lines."""
    from cosmosfl.apps.flower.server_app import refuse_interrupted
    from cosmosfl.experiment.rundir import RunDirectory

    refuse_interrupted(out, force)

    if RunDirectory(out).finished and not force:
        raise ConfigError(
            f"{out} already holds a finished run (summary.json exists); "
            "choose another --out or pass --force to overwrite it"
        )


def _print_summary(summary: dict[str, Any], out: str) -> None:
    final = summary["final_round"]
    print(f"final round {summary['rounds']} ({summary['algorithm']} on Flower), mean over clients:")
    for model, acc in final["mean_accuracy"].items():
        tag = "  <- reported" if model == summary["reported_model"] else ""
        print(f"  {model:<14} top1 {acc:.4f}{tag}")
    if "clusters" in summary:
        print(f"  clusters: K={summary['K']}")
    for cid, reason in (summary.get("clients_refused") or {}).items():
        print(f"  client {cid} refused to join: {reason}")
    print(
        f"  {summary['seconds_per_round']:.1f} s per round, "
        f"{summary.get('round_trips_per_round', 0):.0f} round trips per round; run directory: {out}"
    )
