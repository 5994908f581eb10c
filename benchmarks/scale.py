"""Scale limits of the in-process engine: peak memory and seconds per round of COSMOS for N
clients and |U| public samples on one machine, and where it breaks first (docs/reliability.md,
"Scale limits").

    python benchmarks/scale.py --data-dir ../shared/data                  # the default grid
    python benchmarks/scale.py --data-dir ../shared/data --cells train:100x10000 --timeout 900
    python benchmarks/scale.py --data-dir ../shared/data --cells server:5000x50000 \
        --src ../main/src --tag before                                    # another revision

Every cell runs in a child process of its own (cells share no heap), one torch thread, and is
stopped when its resident memory passes --memory-limit-gib ("broke: memory"; its data segment
is also capped 0.5 GiB above, so an allocation past that fails) or its wall time
--timeout ("timeout"). Two kinds of cell, both COSMOS on MNIST (paper split, 5 class groups,
Algorithm 1 with target_clusters 5, λ = 5, every epoch count 1, 2 rounds):

- `train:NxU` is `cosmosfl run` (run_experiment: run directory, metrics.jsonl, checkpoints)
  with mlp x0.125 clients (25,818 parameters), an mlp server model, batch size 128: the whole
  cost of a round. Its seconds per phase come from metrics.jsonl's `seconds`.
- `server:NxU` is the same engine (InProcessEngine) and algorithm (Cosmos) with clients whose
  learner costs nothing: it answers `predict_public` with its class group's labels on U plus
  its own noise (a fresh float32 (|U|, 10) matrix, like a real client's) and trains nothing;
  the cluster models are no-ops too. It measures what the server side holds and does for
  N x |U| (every client's pseudo-labels, validation, distances, clustering, teachers, targets)
  without the client training that makes real cells slow.

A cell cut by the timeout records the phases it finished, the client tasks it finished in the
phase it was cut in, and a projection of its round 1 (labelled as such, on the wall and on the
CPU clock): finished phases as measured, the cut phase as N x the mean client task, phases not
reached from per-unit rates, each from the train cell that ran most of that phase in round 1
(prediction and client distillation per client per sample of U, local training per private
sample, evaluation per client, server distillation per sample of U, clustering per N² x |U|).
CPU seconds are the child's own (user + system), about what the round would take on an idle
core. Results are merged, by cell, into OUT (default
benchmarks/results/scale.json); the table is printed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GIB = 1 << 30
DEFAULT_CELLS = [
    *(f"train:{n}x{u}" for n in (100, 1000, 5000) for u in (10_000, 50_000)),
    "server:2000x50000",
    "server:5000x50000",
]
CLIENT_PHASES = ("local_training", "prediction", "client_distillation", "evaluation")
TASK_OF_PHASE = {
    "local_training": "train_local",
    "prediction": "predict_public",
    "client_distillation": "distill",
    "evaluation": "evaluate",
}
MNIST_TRAIN = 60_000


# -- the cells (run in the child) -------------------------------------------------------------
def train_config(n: int, u: int, data_dir: str, rounds: int) -> dict[str, Any]:
    """The `cosmosfl run` config of a train cell (also written to the cell's folder)."""
    return {
        "seed": 1,
        "rounds": rounds,
        "device": "cpu",
        "threads": 1,
        "data": {
            "dataset": "mnist",
            "data_dir": data_dir,
            "partition": "paper",
            "num_clients": n,
            "num_groups": 5,
            # 5,000 clients share the 10,000 private images left beside |U| = 50,000: with
            # alpha 5 some client gets none (PartitionError), so that cell uses alpha 100.
            "alpha": 100.0 if n * 5 > MNIST_TRAIN - u else 5.0,
            "mix_fraction": 0.1,
            "public_fraction": u / MNIST_TRAIN,
        },
        "clients": {
            "models": {"mlp": 1.0},
            "width": 0.125,
            "batch_size": 128,
            "lr": 1e-3,
            "distill_lr": 1e-3,
        },
        "algorithm": {
            "name": "cosmos",
            "clustering": "greedy",  # Algorithm 1: the documented cells were measured with it
            "target_clusters": 5,
            "pretrain_epochs": 1,
            "local_epochs": 1,
            "server_epochs": 1,
            "distill_epochs": 1,
            "lam": 5.0,
            "server_model": "mlp",
            "server_lr": 1e-3,
            "server_batch_size": 128,
        },
    }


class _Events:
    """Line-buffered JSON events of the child, with its memory at each event."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("a", buffering=1)
        self.start = time.perf_counter()
        self.round = 0

    def __call__(self, event: str, **fields: Any) -> None:
        rss, hwm = _memory(os.getpid())
        line = {"event": event, "t": round(time.perf_counter() - self.start, 3), "rss": rss}
        line["cpu"] = round(time.process_time(), 3)  # this process's CPU seconds so far
        line.update(hwm=hwm, round=self.round, **fields)
        self.file.write(json.dumps(line) + "\n")


def _memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes, 0 when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


def _instrument_clients(events: _Events) -> None:
    """Time every task a client serves (benchmark-only wrapper, in the child process)."""
    from cosmosfl.client import Client

    handle = Client.handle

    def timed(self: Client, message: Any) -> Any:
        start, cpu = time.perf_counter(), time.process_time()
        reply = handle(self, message)
        seconds = round(time.perf_counter() - start, 5)
        line = {"event": "task", "t": round(time.perf_counter() - events.start, 3)}
        line.update(round=events.round, task=message.task, s=seconds)
        line["c"] = round(time.process_time() - cpu, 5)  # the task's CPU seconds
        events.file.write(json.dumps(line) + "\n")
        return reply

    Client.handle = timed  # type: ignore[method-assign]


def _reporter(events: _Events) -> Any:
    from cosmosfl.engines.progress import Reporter

    class Probe(Reporter):
        def round_start(self, round_num: int, rounds: int) -> None:
            events.round = round_num
            events("round_start")

        def phase(self, name: str) -> None:
            events("phase", name=name)

        def round_end(self, record: dict[str, Any]) -> None:
            events(
                "round_end",
                seconds=record["seconds"],
                K=record.get("K"),
                mean_accuracy=record.get("mean_accuracy"),
            )

        def log(self, text: str) -> None:
            if "|U| =" in text:  # run_experiment logs this once the experiment is built
                events("built", text=text)

    return Probe()


def child(spec: dict[str, Any]) -> None:
    """Run one cell; every step goes to events.jsonl in the cell's folder."""
    import torch

    torch.set_num_threads(1)
    # Backstop behind the parent's RSS guard: allocations past the limit + 0.5 GiB of data
    # segment fail (MemoryError) instead of pushing the machine towards the OOM killer.
    cap = int(spec["memory_limit"] + GIB // 2)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    folder = Path(spec["folder"])
    events = _Events(folder / "events.jsonl")
    events("start", argv=sys.argv)
    _instrument_clients(events)
    if spec["kind"] == "train":
        import yaml

        from cosmosfl.experiment.config import config_from_dict
        from cosmosfl.experiment.runner import run_experiment

        config = train_config(spec["n"], spec["u"], spec["data_dir"], spec["rounds"])
        (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        cfg = config_from_dict(config)
        run_experiment(cfg, folder / "run", progress=_reporter(events), force=True)
    else:
        _server_cell(spec, events)
    events("done", maxrss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


def _server_cell(spec: dict[str, Any], events: _Events) -> None:
    import numpy as np

    from cosmosfl.algorithms.cosmos import Cosmos
    from cosmosfl.client import Client
    from cosmosfl.data import channel_stats, load_dataset, paper_split, prepare_images
    from cosmosfl.engines.simulation import InProcessEngine
    from cosmosfl.learners.base import Learner

    n, u, m, groups = spec["n"], spec["u"], 10, 5
    ds = load_dataset("mnist", spec["data_dir"])
    part = paper_split(
        ds.y_train, ds.y_test, groups, seed=1, num_groups=groups, public_fraction=u / MNIST_TRAIN
    )
    mean, std = channel_stats(ds.x_train[part.public])
    public_x = prepare_images(ds.x_train[part.public], mean, std)
    rng = np.random.default_rng(0)
    base = []
    for _ in range(groups):  # each group's labels on U: a peaked softmax of random logits
        logits = rng.normal(0.0, 3.0, (u, m)).astype(np.float32)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        base.append(e / e.sum(axis=1, keepdims=True))

    class Stub(Learner):
        """Costs nothing to train; predicts its group's labels on U plus its own noise."""

        def __init__(self, group: int | None, seed: int) -> None:
            self.num_classes, self.group = m, group
            self.rng = np.random.default_rng(seed)

        def fit(self, x: np.ndarray, y: np.ndarray, *, epochs: int = 1) -> dict[str, float]:
            return {}

        def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):  # type: ignore[no-untyped-def]
            return {}

        def predict_proba(self, x: np.ndarray) -> np.ndarray:
            if self.group is None or len(x) != u:
                return np.full((len(x), m), 1.0 / m, dtype=np.float32)
            p = base[self.group] * self.rng.uniform(0.8, 1.2, (u, m)).astype(np.float32)
            return p / p.sum(axis=1, keepdims=True)

    x1, y1 = public_x[:1], np.zeros(1, dtype=np.int64)
    clients = [
        Client(cid, Stub(cid * groups // n, cid), (x1, y1), (public_x[:2], np.zeros(2, np.int64)))
        for cid in range(n)
    ]
    events("built", text=f"server cell: {n} stub clients, |U| = {u}")
    algorithm = Cosmos(
        clustering="greedy",
        target_clusters=5,
        pretrain_epochs=1,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
        server_learner=lambda shape, classes, seed: Stub(None, seed),
        distance_sample=spec.get("distance_sample"),
    )
    engine = InProcessEngine(clients, public_x, seed=1, reporter=_reporter(events))
    engine.run(algorithm, spec["rounds"])


# -- the parent: guards, results, table ------------------------------------------------------
def run_cell(cell: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    kind, size = cell.split(":")
    n, u = (int(v) for v in size.split("x"))
    folder = cell_folder(work, cell, args.tag)
    if folder.exists():
        subprocess.run(["rm", "-rf", str(folder)], check=True)
    folder.mkdir(parents=True)
    spec = {
        "kind": kind,
        "n": n,
        "u": u,
        "rounds": args.rounds,
        "folder": str(folder),
        "data_dir": str(Path(args.data_dir).resolve()),
        "distance_sample": args.distance_sample if kind == "server" else None,
        "memory_limit": int(args.memory_limit_gib * GIB),
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    src = Path(args.src).resolve() if args.src else REPO / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    limit = int(args.memory_limit_gib * GIB)
    start, load_before = time.perf_counter(), os.getloadavg()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with (folder / "stderr.txt").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", str(folder / "spec.json")],
            env=env,
            stdout=err,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        polled, status = 0, None
        while proc.poll() is None:
            rss, _ = _memory(proc.pid)
            polled = max(polled, rss)
            if rss > limit:
                status = "broke: memory"
            elif time.perf_counter() - start > args.timeout:
                status = "timeout"
            if status is not None:
                os.kill(proc.pid, signal.SIGKILL)  # the child this call started
                proc.wait()
                break
            time.sleep(0.2)
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(getattr(cpu_after, f) - getattr(cpu_before, f) for f in ("ru_utime", "ru_stime"))
    events = _read_events(folder / "events.jsonl")
    tail = (folder / "stderr.txt").read_text()[-2000:]
    if status is None:
        if proc.returncode == 0 and events and events[-1]["event"] == "done":
            status = "ok"
        elif "MemoryError" in tail or proc.returncode in (-9, 137):
            status = "broke: memory"
        else:
            status = f"error (exit {proc.returncode})"
    result = summarise_cell(events, n, u)
    result.update(
        cell=cell,
        kind=kind,
        clients=n,
        public=u,
        status=status,
        wall_s=round(wall, 1),
        rounds_requested=args.rounds,
        cpu_s=round(cpu, 1),
        peak_rss_gib=round(max(polled, result.pop("hwm_max", 0)) / GIB, 3),
        memory_limit_gib=args.memory_limit_gib,
        timeout_s=args.timeout,
        src=str(src),
        revision=_revision(src),
        tag=args.tag,
        distance_sample=spec["distance_sample"],
        load_average={"start": list(load_before), "end": list(os.getloadavg())},
    )
    if not status.startswith("ok"):
        result["stderr_tail"] = tail[-600:]
    if kind == "train":
        result["config"] = train_config(n, u, "DATA_DIR", args.rounds)
    return result


def _revision(src: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or None


def _read_events(path: Path) -> list[dict[str, Any]]:
    out = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # the line a kill cut short
                break
    return out


def summarise_cell(events: list[dict[str, Any]], n: int, u: int) -> dict[str, Any]:
    """Build time, memory, each finished round's seconds by phase (wall, from the record, and
    CPU, from the events), and for a cut round the phases it finished and the client tasks
    done in the phase it was cut in."""
    out: dict[str, Any] = {
        "rounds": [],
        "hwm_max": max((e.get("hwm", 0) for e in events), default=0),
    }
    built = next((e for e in events if e["event"] == "built"), None)
    if built is not None:
        out["build_s"] = built["t"]
        out["rss_after_build_gib"] = round(built["rss"] / GIB, 3)
    done = next((e for e in events if e["event"] == "done"), None)
    if done is not None:
        out["hwm_max"] = max(out["hwm_max"], done["maxrss"])
    by_round: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["round"] > 0:
            by_round.setdefault(e["round"], []).append(e)
    for r, evs in sorted(by_round.items()):
        end = next((e for e in evs if e["event"] == "round_end"), None)
        peak = max((e.get("hwm", 0) for e in evs if e["event"] != "task"), default=0)
        phases = [e for e in evs if e["event"] == "phase"]
        if end is not None:
            info: dict[str, Any] = {
                "round": r,
                "complete": True,
                "seconds": end["seconds"],
                "K": end["K"],
                "mean_accuracy": end["mean_accuracy"],
                "rss_at_end_gib": round(end["rss"] / GIB, 3),
                "hwm_gib": round(peak / GIB, 3),
            }
            begin = next((e for e in evs if e["event"] == "round_start"), None)
            if begin is not None and "cpu" in end:  # CPU seconds: less sensitive to the load
                cpu = _durations([*phases, end], "cpu")
                info["cpu_seconds"] = {**cpu, "total": round(end["cpu"] - begin["cpu"], 3)}
            out["rounds"].append(info)
            continue
        last = max((e for e in evs if "t" in e), key=lambda e: e["t"])
        info = {"round": r, "complete": False, "finished_phases": _durations(phases, "t")}
        if all("cpu" in e for e in phases):
            info["finished_phases_cpu"] = _durations(phases, "cpu")
        cut = phases[-1] if phases else None
        if cut is not None:
            task = TASK_OF_PHASE.get(cut["name"])
            tasks = [e for e in _tasks_after(evs, cut) if e["task"] == task]
            info.update(
                cut_in_phase=cut["name"],
                cut_phase_elapsed_s=round(last["t"] - cut["t"], 3),
                tasks_done_in_cut_phase=len(tasks),
                mean_task_s=round(sum(e["s"] for e in tasks) / len(tasks), 5) if tasks else None,
            )
            if "cpu" in cut and tasks and all("c" in e for e in tasks):
                info["mean_task_cpu"] = round(sum(e["c"] for e in tasks) / len(tasks), 5)
                info["cut_phase_elapsed_cpu"] = round(sum(e["c"] for e in tasks), 3)
        out["rounds"].append(info)
    return out


def _durations(marks: list[dict[str, Any]], clock: str) -> dict[str, float]:
    """Seconds of each phase on `clock` ("t": wall, "cpu") between consecutive marks (phase
    events, then the round's end when it has one); a phase that recurs is summed."""
    out: dict[str, float] = {}
    for a, b in itertools.pairwise(marks):
        if a["event"] == "phase":
            out[a["name"]] = round(out.get(a["name"], 0.0) + b[clock] - a[clock], 3)
    return out


def _tasks_after(evs: list[dict[str, Any]], phase: dict[str, Any]) -> list[dict[str, Any]]:
    """Task events written after `phase`'s event (file order)."""
    index = evs.index(phase)
    return [e for e in evs[index + 1 :] if e["event"] == "task"]


UNITS = {  # what each phase's seconds scale with (N clients, U public samples)
    "local_training": lambda n, u: MNIST_TRAIN - u,  # every private sample, one epoch
    "prediction": lambda n, u: n * u,
    "evaluation": lambda n, u: n,
    "clustering": lambda n, u: n * n * u,
    "server_distillation": lambda n, u: u,
    "client_distillation": lambda n, u: n * u,
}
# Per clock: the seconds of a complete round, of a cut round's finished phases, of one client
# task, and of the cut phase so far.
CLOCKS = {
    "wall": ("seconds", "finished_phases", "mean_task_s", "cut_phase_elapsed_s"),
    "cpu": ("cpu_seconds", "finished_phases_cpu", "mean_task_cpu", "cut_phase_elapsed_cpu"),
}


def rates(
    cells: list[dict[str, Any]], clock: str = "wall"
) -> tuple[dict[str, float], dict[str, str]]:
    """Seconds per unit of each phase in round 1 (pre-training and clustering included), each
    from the train cell with the most units of that phase that finished it: a complete round,
    or a phase a cut round finished (evaluation, three times a round, from complete rounds
    only). Returns the rates and, per phase, the cell it came from."""
    key, finished_key = CLOCKS[clock][:2]
    best: dict[str, tuple[float, float, str]] = {}  # phase -> (units, seconds, cell)
    for c in cells:
        if c["kind"] != "train" or c.get("tag"):
            continue
        first = next((r for r in c.get("rounds", []) if r.get("round") == 1), None)
        if first is None:
            continue
        measured = first.get(key) if first.get("complete") else first.get(finished_key)
        for phase, seconds in (measured or {}).items():
            if phase not in UNITS or (phase == "evaluation" and not first.get("complete")):
                continue
            units = UNITS[phase](c["clients"], c["public"])
            if phase not in best or units > best[phase][0]:
                best[phase] = (units, seconds, c["cell"])
    if set(best) != set(UNITS):
        return {}, {}
    rate = {phase: seconds / units for phase, (units, seconds, _) in best.items()}
    return rate, {phase: cell for phase, (_, _, cell) in best.items()}


def project(cell: dict[str, Any], rate: dict[str, float], clock: str = "wall") -> float | None:
    """Projected seconds of one full round of a cell cut short (see the module docstring)."""
    _, finished_key, task_key, elapsed_key = CLOCKS[clock]
    n, u = cell["clients"], cell["public"]
    cut = next((r for r in cell.get("rounds", []) if not r.get("complete")), None)
    if cut is None and cell.get("rounds"):
        return None
    total, seen = 0.0, set()
    if cut is not None:
        if finished_key not in cut:
            return None
        total += sum(cut[finished_key].values())
        seen.update(cut[finished_key])
        phase = cut.get("cut_in_phase")
        if phase is not None:
            seen.add(phase)
            done, task_s = cut.get("tasks_done_in_cut_phase", 0), cut.get(task_key)
            elapsed = cut.get(elapsed_key, 0.0)
            if phase in TASK_OF_PHASE and done and task_s is not None:
                # `evaluation` runs three times a round; the cut one is counted once here
                total += max(elapsed, n * task_s)
            elif rate:
                total += max(elapsed, rate[phase] * UNITS[phase](n, u))
            else:
                return None
    if not rate:
        return None
    total += sum(r * UNITS[p](n, u) for p, r in rate.items() if p not in seen)
    return round(total, 1)


def table(cells: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    cpu_rate, _ = rates(cells, "cpu")
    columns = [
        "cell",
        "N",
        "U",
        "status",
        "peak RSS GiB",
        "build s",
        "wall s/round",
        "CPU s/round",
        "CPU s/round (projected)",
        "slowest phase",
    ]
    rows = []
    for c in sorted(
        cells, key=lambda c: (c["kind"] == "server", c.get("tag") or "", c["clients"], c["public"])
    ):
        complete = [r for r in c.get("rounds", []) if r.get("complete")]
        measured = " / ".join(f"{r['seconds']['total']:.0f}" for r in complete) if complete else "-"
        cpu = " / ".join(f"{r['cpu_seconds']['total']:.0f}" for r in complete if "cpu_seconds" in r)
        slow = "-"
        if complete:
            secs = {k: v for k, v in complete[0]["seconds"].items() if k in UNITS}
            slow = max(secs, key=secs.__getitem__)
        else:
            cut = next((r for r in c.get("rounds", []) if not r.get("complete")), None)
            if cut is not None and cut.get("cut_in_phase"):
                slow = f"cut in round {cut['round']}, {cut['cut_in_phase']}"
                if cut["cut_in_phase"] in TASK_OF_PHASE:
                    slow += f" ({cut['tasks_done_in_cut_phase']} of {c['clients']} clients)"
            elif not c.get("rounds"):
                slow = "cut while building" if "build_s" not in c else "cut before round 1"
        projected = project(c, cpu_rate, "cpu") if c["kind"] == "train" else None
        name = c["cell"] + (f" [{c['tag']}]" if c.get("tag") else "")
        rows.append(
            [
                name,
                c["clients"],
                c["public"],
                c["status"],
                c["peak_rss_gib"],
                c.get("build_s", "-"),
                measured,
                cpu or "-",
                projected if projected is not None else "-",
                slow,
            ]
        )
    return columns, rows


def cell_folder(work: Path, cell: str, tag: str) -> Path:
    return work / f"{cell.replace(':', '-')}{'-' + tag if tag else ''}"


def resummarise(cells: list[dict[str, Any]], work: Path) -> None:
    """Recompute each cell's summary from the events its folder kept (e.g. after changing
    this script's summary); status, wall and memory guards stay as they were recorded."""
    for c in cells:
        folder = cell_folder(work, c["cell"], c.get("tag") or "")
        events = _read_events(folder / "events.jsonl")
        if not events:
            continue
        fresh = summarise_cell(events, c["clients"], c["public"])
        hwm = fresh.pop("hwm_max")
        c.update(fresh)
        c["peak_rss_gib"] = max(c["peak_rss_gib"], round(hwm / GIB, 3))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument(
        "--cells",
        default=",".join(DEFAULT_CELLS),
        help="comma-separated KIND:NxU, KIND train or server",
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per cell")
    parser.add_argument("--memory-limit-gib", type=float, default=14.0)
    parser.add_argument(
        "--distance-sample",
        type=int,
        default=None,
        help="server cells: rows of U for the approximate distances",
    )
    parser.add_argument("--src", default=None, help="cosmosfl source tree for the children")
    parser.add_argument("--tag", default="", help="label of these cells (e.g. before)")
    parser.add_argument("--work", default=str(REPO / "runs" / "scale"))
    parser.add_argument(
        "--resummarise", action="store_true", help="rebuild OUT's cells from --work's events"
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "scale.json"))
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(Path(args.child).read_text()))
        return 0
    out = Path(args.out)
    previous = json.loads(out.read_text())["data"]["cells"] if out.is_file() else []
    cells = {(c["cell"], c.get("tag") or ""): c for c in previous}
    if args.resummarise:
        resummarise(list(cells.values()), Path(args.work))
        _write(out, list(cells.values()))
        print(_markdown(list(cells.values())))
        return 0
    for cell in args.cells.split(","):
        print(f"{cell} {args.tag} ...", flush=True)
        result = run_cell(cell, args, Path(args.work))
        cells[(cell, args.tag)] = result
        print(
            f"  {result['status']}, peak RSS {result['peak_rss_gib']} GiB, {result['wall_s']} s",
            flush=True,
        )
        _write(out, list(cells.values()))
    print(_markdown(list(cells.values())))
    return 0


def _markdown(cells: list[dict[str, Any]]) -> str:
    from cosmosfl.bench.common import Report

    columns, rows = table(cells)
    return Report("scale", "Scale limits of the in-process engine", columns, rows).text()


def _write(out: Path, cells: list[dict[str, Any]]) -> None:
    from cosmosfl.bench.common import machine

    columns, rows = table(cells)
    rate, source = rates(cells)
    cpu_rate, cpu_source = rates(cells, "cpu")
    payload = {
        "benchmark": "scale",
        "title": "Scale limits of the in-process engine (COSMOS, MNIST, 2 rounds)",
        "command": "python benchmarks/scale.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "columns": columns,
        "rows": rows,
        "notes": [
            "peak RSS: the child's VmHWM, or the highest RSS polled (every 0.2 s) when killed",
            "wall s/round: metrics.jsonl `seconds.total` of each finished round",
            "CPU s/round: the child's CPU seconds over the round (about an idle core's wall)",
            "CPU s/round (projected): round 1 of a cut cell; phases not reached from per-phase "
            "rates (data.cpu_rates, from the cells in data.cpu_rates_from; wall projections in "
            "data.projected_round_s)",
            "server cells: stub clients (no training): the server side's memory and seconds",
        ],
        "data": {
            "cells": cells,
            "rates": rate,
            "rates_from": source,
            "cpu_rates": cpu_rate,
            "cpu_rates_from": cpu_source,
            "projected_round_s": {
                f"{c['cell']} {c.get('tag') or ''}".strip(): {
                    "wall": project(c, rate, "wall"),
                    "cpu": project(c, cpu_rate, "cpu"),
                }
                for c in cells
                if c["kind"] == "train"
            },
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, default=str) + "\n")


if __name__ == "__main__":
    sys.exit(main())
