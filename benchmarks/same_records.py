"""Do two git revisions of cosmosfl write the same records? Fixed-seed short runs on each, then
their metrics.jsonl compared line by line without the timing fields.

    python benchmarks/same_records.py                       # main against the working tree
    python benchmarks/same_records.py --old 390aab2 --new HEAD -a cosmos,local
    python benchmarks/same_records.py --old 30a0cf6 -a cosmos --rounds 3 \
        --config configs/satellite-mixed.yaml --data-dir ../shared/data \
        --new-set 'clients.models={...}'   # the new tree's config changed where names moved

Each revision runs from its own tree (`git worktree add --detach` into a temporary folder; the
working tree itself for `--new` when it is not given, uncommitted changes included), with
PYTHONPATH at that tree's `src` and the Python running this script. The runs are `cosmosfl run`
on the digits config of the tree that runs them (configs/default.yaml, or `--config`, a path
in each tree) with `rounds` overridden, `--set key=value` on both configs and `--new-set
key=value` on the new tree's only (a setting that must be spelled differently there to mean
the same), one per algorithm, plus `simulate`: COSMOS through the Python API (`simulate` with
a default `Cosmos`), which the command line does not exercise, and `flower`: COSMOS on
Flower's simulation runtime (`cosmosfl flower simulate`: the real ServerApp and ClientApps on
Ray, needs `.[flower]` and flwr[simulation]) with a small federation (FLOWER below), whose
records also hold the Flower engine's own fields (round trips, missing clients). Exit status 0
when every run's records are identical, 1 with the first difference of each run that differs
otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ALGORITHMS = ("cosmos", "comet", "fedmd", "local", "fedavg", "ditto")
# Wall-clock fields of a record (Flower's adds each client's seconds); everything else must match.
TIMING = frozenset({"seconds", "client_seconds"})
# Parameter-sharing algorithms need one torch architecture for every client (the others of
# them, e.g. `-a fedprox,fedbabu,pfedck,pfedhn,fedselect`, run the same way).
HOMOGENEOUS = frozenset({"fedavg", "fedprox", "ditto", "fedbabu", "fedselect", "pfedck", "pfedhn"})

RUN = "import sys; from cosmosfl.cli.main import main; sys.exit(main(sys.argv[1:]))"
# COSMOS from the Python API, with the server model `simulate` gives it by default.
SIMULATE = """
import json, sys
import numpy as np
from cosmosfl import Client, Cosmos, TorchLearner, simulate
from cosmosfl.data import channel_stats, load_dataset, paper_split, prepare_images
from cosmosfl.models import build_model

ds = load_dataset("digits")
part = paper_split(ds.y_train, ds.y_test, num_clients=6, num_groups=3, seed=0)
mean, std = channel_stats(ds.x_train[part.public])
x, xt = prepare_images(ds.x_train, mean, std), prepare_images(ds.x_test, mean, std)
clients = []
for i in range(6):
    net = build_model("mlp" if i % 2 else "cnn", in_channels=1, num_classes=10, image_size=8,
                      seed=i)
    tr, te = part.client_train[i], part.client_test[i]
    clients.append(Client(i, TorchLearner(net, seed=i, distill_lr=1e-3),
                          (x[tr], ds.y_train[tr]), (xt[te], ds.y_test[te])))
algorithm = Cosmos(target_clusters=3, server_model="mlp", server_lr=1e-3, pretrain_epochs=2,
                   local_epochs=1, server_epochs=2, distill_epochs=1)
result = simulate(algorithm, clients, x[part.public], rounds=int(sys.argv[2]), seed=1)
with open(sys.argv[1], "w") as f:
    f.writelines(json.dumps(r) + "\\n" for r in result.records)
"""
# The `flower` run: COSMOS on four simulated nodes (Ray starts one process per node).
FLOWER = {
    "threads": 1,
    "data.num_clients": 4,
    "data.num_groups": 2,
    "clients.models": ["mlp", "mlp", "cnn", "mlp"],
    "algorithm.target_clusters": 2,
    "algorithm.pretrain_epochs": 2,
    "algorithm.local_epochs": 1,
    "algorithm.server_epochs": 2,
    "algorithm.distill_epochs": 1,
    "algorithm.server_model": "mlp",
}


def _set(cfg: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = cfg
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _config(
    tree: Path, algorithm: str, rounds: int, options: argparse.Namespace, new: bool
) -> dict[str, Any]:
    import yaml

    cfg = yaml.safe_load((tree / options.config).read_text())
    cfg["rounds"] = rounds
    if options.data_dir:
        cfg.setdefault("data", {})["data_dir"] = str(Path(options.data_dir).resolve())
    for setting in [*options.set, *(options.new_set if new else [])]:
        key, _, value = setting.partition("=")
        _set(cfg, key, yaml.safe_load(value))
    if algorithm == "flower":
        for key, value in FLOWER.items():
            _set(cfg, key, value)
    elif algorithm != "cosmos":  # the default config's algorithm section is COSMOS's
        cfg["algorithm"] = {"name": algorithm, "pretrain_epochs": 2, "local_epochs": 1}
    if algorithm in HOMOGENEOUS:
        cfg["clients"]["models"] = {"mlp": 1.0}
    return cfg


def run_all(
    tree: Path,
    out: Path,
    algorithms: list[str],
    rounds: int,
    options: argparse.Namespace,
    new: bool = False,
) -> dict[str, Path]:
    """Each algorithm's metrics.jsonl written by the cosmosfl in `tree`."""
    import yaml

    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out.mkdir(parents=True)
    written = {}
    for name in algorithms:
        run_dir = out / name
        if name == "simulate":
            run_dir.mkdir(parents=True)
            cmd = [sys.executable, "-c", SIMULATE, str(run_dir / "metrics.jsonl"), str(rounds)]
        else:
            config = out / f"{name}.yaml"
            config.write_text(
                yaml.safe_dump(_config(tree, name, rounds, options, new), sort_keys=False)
            )
            run = ["flower", "simulate", "--num-cpus", "2"] if name == "flower" else ["run"]
            cmd = [sys.executable, "-c", RUN, *run, "--config", str(config)]
            cmd += ["--out", str(run_dir)]
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{name} failed in {tree}:\n{done.stderr[-3000:]}")
        written[name] = run_dir / "metrics.jsonl"
    return written


def _without_timing(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in TIMING}


def _differences(old: Any, new: Any, path: str = "") -> Iterator[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in new:
                yield f"{where}: only in old ({old[key]!r})"
            elif key not in old:
                yield f"{where}: only in new ({new[key]!r})"
            else:
                yield from _differences(old[key], new[key], where)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif old != new or type(old) is not type(new):
        yield f"{path}: old {old!r}, new {new!r}"


def first_difference(old: Path, new: Path) -> str | None:
    """Where two metrics.jsonl files first differ (timing fields aside); None if nowhere."""
    a, b = (p.read_text().splitlines() for p in (old, new))
    if len(a) != len(b):
        return f"{len(a)} records in old, {len(b)} in new"
    for line, (x, y) in enumerate(zip(a, b, strict=True), start=1):
        found = next(
            _differences(_without_timing(json.loads(x)), _without_timing(json.loads(y))), None
        )
        if found is not None:
            return f"record {line}: {found}"
    return None


def _tree(rev: str | None, into: Path) -> Path:
    if rev is None:
        return REPO
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), rev],
        check=True,
        capture_output=True,
    )
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="main", help="git revision (default: main)")
    parser.add_argument("--new", default=None, help="git revision (default: the working tree)")
    parser.add_argument(
        "-a",
        "--algorithms",
        default=",".join((*ALGORITHMS, "simulate", "flower")),
        help="comma-separated; `simulate` is COSMOS through the Python API, `flower` COSMOS "
        "on Flower's simulation runtime",
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--config", default="configs/default.yaml", help="config file, a path in each tree"
    )
    parser.add_argument("--data-dir", default=None, help="sets data.data_dir")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=YAML",
        help="a dotted setting for both trees' configs (repeatable)",
    )
    parser.add_argument(
        "--new-set",
        action="append",
        default=[],
        metavar="KEY=YAML",
        help="a dotted setting for the new tree's config only (repeatable)",
    )
    args = parser.parse_args(argv)
    algorithms = args.algorithms.split(",")
    with tempfile.TemporaryDirectory(prefix="same-records-") as tmp:
        base, trees = Path(tmp), []
        try:
            old_tree = _tree(args.old, base / "old-tree")
            trees.append(old_tree)
            new_tree = _tree(args.new, base / "new-tree")
            if args.new is not None:
                trees.append(new_tree)
            old = run_all(old_tree, base / "old", algorithms, args.rounds, args)
            new = run_all(new_tree, base / "new", algorithms, args.rounds, args, new=True)
        finally:
            for tree in trees:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                )
        same = True
        for name in algorithms:
            diff = first_difference(old[name], new[name])
            lines = len(old[name].read_text().splitlines())
            print(f"{name}: {'identical' if diff is None else 'DIFFERENT'} ({lines} records)")
            if diff is not None:
                print(f"  first difference: {diff}")
                same = False
    print(f"{args.old} vs {args.new or 'working tree'}: {'same' if same else 'different'} records")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
