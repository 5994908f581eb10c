"""benchmarks/reference.py's cosmosfl side: the split it shares with the official code, cosmosfl's
runs, and the tables (same work, same answer, time to accuracy)."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cosmosfl.bench.common import machine
from cosmosfl.bench.configs import find_data_dir
from cosmosfl.data import load_dataset
from cosmosfl.engines.simulation import InProcessEngine
from cosmosfl.experiment.build import Experiment, build_experiment
from cosmosfl.experiment.config import load_config
from cosmosfl.models.registry import build_model, count_parameters

# cosmosfl's phase names -> the table's; the official code's are mapped in `official_phases`.
PHASES = ("local", "prediction", "server", "client distillation", "evaluation", "other")
TRAINING = ("local", "server", "client distillation")


def same_work_overrides(a: argparse.Namespace) -> list[str]:
    """The official configuration in cosmosfl's terms (README §6 of the reference notes)."""
    e = a.epochs
    return [
        "clients.models={alexnet: 1.0}", "clients.width=1.0", "clients.batch_size=32",
        "clients.lr=1.0e-3", "clients.distill_lr=1.0e-4",  # local CE, client distillation
        f"algorithm.pretrain_epochs={e}", f"algorithm.local_epochs={e}",
        f"algorithm.server_epochs={e}", f"algorithm.distill_epochs={e}",
        "algorithm.server_model=alexnet", "algorithm.server_width=1.0",
        "algorithm.server_lr=1.0e-3", "algorithm.server_batch_size=32",
        "algorithm.clustering=greedy",  # Algorithm 1, as the official code
        "algorithm.distance=l2", "algorithm.target_clusters=5", f"algorithm.lam={a.lam}",
        "algorithm.client_weights=uniform", "algorithm.temperature=1.0",
        "algorithm.aggregation=mean",
    ]  # fmt: skip


def digits32(work: Path) -> Path:
    """scikit-learn's digits as 32x32 RGB (each pixel 4x4, grey in all three channels), the
    input size of the official AlexNet; the stand-in the reference notes' shims use."""
    ds = load_dataset("digits")
    path = work / "digits32.npz"

    def rgb32(x: np.ndarray) -> np.ndarray:
        big = np.kron(x[..., 0], np.ones((4, 4), np.uint8))
        return np.repeat(big[..., None], 3, axis=-1)

    np.savez(path, x_train=rgb32(ds.x_train), y_train=ds.y_train, x_test=rgb32(ds.x_test),
             y_test=ds.y_test, classes=np.array(ds.classes))  # fmt: skip
    return path


def build_pair(a: argparse.Namespace, work: Path) -> tuple[Experiment, Experiment]:
    """The same-work experiment and the recommended one; same data section, so same split."""
    torch.set_num_threads(a.threads)
    if a.dataset == "cifar10":
        dataset = ["data.dataset=cifar10", f"data.data_dir={find_data_dir(a.data_dir)}"]
    else:
        dataset = [f"data.dataset={digits32(work)}"]
    data = [
        *dataset, f"data.num_clients={a.clients}", f"data.max_train={a.max_train}",
        f"data.public_fraction={a.public_size / a.max_train}",
        f"data.test_per_client={a.test_per_client}",
        f"seed={a.seed}", f"threads={a.threads}", "device=cpu",
    ]  # fmt: skip
    same = build_experiment(load_config(a.config, [*data, *same_work_overrides(a)]))
    recommended = build_experiment(load_config(a.config, data))
    for c, r in zip(same.clients, recommended.clients, strict=True):
        assert np.array_equal(c.train[0], r.train[0]) and np.array_equal(c.test[1], r.test[1])
    assert np.array_equal(same.public_x, recommended.public_x)
    return same, recommended


def write_split(exp: Experiment, path: Path) -> dict[str, Any]:
    """The split as the official code's create_data() would hand it over (client ids grouped,
    N/5 consecutive ids per class group), in plain tensors; returns its sizes."""
    part, ds = exp.partition, exp.dataset
    groups = [int(g) for g in part.client_group]
    if groups != sorted(groups):
        raise ValueError(f"the official code needs consecutive ids per group, got {groups}")

    def tensors(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(np.array(x, np.float32)), torch.from_numpy(np.array(y, np.int64))

    clients = []
    for c in exp.clients:
        (tx, ty), (sx, sy) = tensors(*c.train), tensors(*c.test)
        clients.append(dict(id=c.id, group=str(groups[c.id]), train_x=tx, train_y=ty,
                            test_x=sx, test_y=sy))  # fmt: skip
    ux, uy = tensors(exp.public_x, ds.y_train[part.public])
    # The official "global test" (its collapse checks and diagnostics): every 5th image of
    # the clients' test splits together.
    gx = np.concatenate([c.test[0] for c in exp.clients])[::5]
    gy = np.concatenate([c.test[1] for c in exp.clients])[::5]
    vx, vy = tensors(gx, gy)
    torch.save(dict(clients=clients, U_x=ux, U_y=uy, Utest_x=vx, Utest_y=vy), path)
    return {
        "path": str(path),
        "train_sizes": [len(c.train[1]) for c in exp.clients],
        "test_sizes": [len(c.test[1]) for c in exp.clients],
        "public_size": len(uy),
        "global_test_size": len(vy),
        "client_group": groups,
        "class_groups": [[int(k) for k in g] for g in part.class_groups or ()],
        "input": "standardised with the public set's channel statistics (cosmosfl's), "
        "fed unchanged to both",
    }


def engine_for(exp: Experiment, seed: int) -> InProcessEngine:
    return InProcessEngine(exp.clients, exp.public_x, seed=seed, device="cpu")


def alexnet_steps(n: int, batch: int = 32) -> list[float]:
    """Seconds of n Adam steps of cosmosfl's alexnet, as the driver times the official one."""
    model = build_model("alexnet", in_channels=3, num_classes=10, image_size=32, seed=0)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    out = []
    for _ in range(n):
        start = time.perf_counter()
        model.train()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        out.append(time.perf_counter() - start)
    return out


def parameter_counts(exp: Experiment, ready: dict[str, Any]) -> dict[str, Any]:
    ours = build_model("alexnet", in_channels=3, num_classes=10, image_size=32, seed=0)
    shapes = [list(p.shape) for p in ours.parameters()]
    return {
        "official": ready["alexnet_params"],
        "cosmosfl": count_parameters(ours),
        "same_shapes": shapes == ready["alexnet_shapes"],
    }


def official_phases(r: dict[str, Any]) -> dict[str, float]:
    s = r["seconds"]
    server = s.get("server_total", 0.0) - s.get("server_evaluation", 0.0)
    evaluation = s.get("client_evaluation", 0.0) + s.get("server_evaluation", 0.0)
    other = s["round"] - s.get("client_total", 0.0) - s.get("server_total", 0.0)
    return {
        "local": s.get("local", 0.0), "prediction": s.get("prediction", 0.0), "server": server,
        "client distillation": s.get("client_distillation", 0.0), "evaluation": evaluation,
        "other": other,
    }  # fmt: skip


def cosmosfl_phases(rec: dict[str, Any]) -> dict[str, float]:
    s = rec["seconds"]
    named = ("local_training", "prediction", "clustering", "server_distillation",
             "client_distillation", "evaluation")  # fmt: skip
    return {
        "local": s.get("local_training", 0.0), "prediction": s.get("prediction", 0.0),
        "server": s.get("clustering", 0.0) + s.get("server_distillation", 0.0),
        "client distillation": s.get("client_distillation", 0.0),
        "evaluation": s.get("evaluation", 0.0),
        "other": rec["wall"] - sum(s.get(k, 0.0) for k in named),
    }  # fmt: skip


def per_round(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Seconds per round of each phase: the mean over the rounds in which it ran (the official
    first round has no client distillation), so the sum is one steady-state round."""
    out = {}
    for phase in PHASES:
        ran = [r[phase] for r in rounds if r[phase] > 0.05 or phase == "other"]
        out[phase] = statistics.fmean(ran) if ran else 0.0
    return out


def official_accuracy(r: dict[str, Any], key: str = "server_accuracy_per_client_1") -> float:
    return statistics.fmean(r[key].values()) / 100  # the official code reports per cent


def progress(official: dict[str, Any], ours: dict[str, Any]) -> str:
    return (
        f"round {official['round'] + 1}: official {official['seconds']['round']:.0f} s, "
        f"own-cluster {official_accuracy(official):.3f} (K={official['num_clusters']}); "
        f"cosmosfl {ours['wall']:.0f} s, cluster model "
        f"{ours['mean_accuracy']['cluster_model']:.3f} (K={ours['K']})"
    )


def time_to_accuracy(
    a: argparse.Namespace, recommended: Experiment, same: dict[str, Any]
) -> dict[str, Any]:
    """cosmosfl's recommended settings on the same split until the official final accuracy
    (at most `a.tta_rounds` rounds, and no longer than the official code took)."""
    rounds = same["official_rounds"]
    accuracies = [official_accuracy(r) for r in rounds]
    target = accuracies[-1]
    first = next(i for i, acc in enumerate(accuracies) if acc >= target)
    official_s = rounds[0]["setup_seconds"] + sum(
        r["seconds"]["round"] for r in rounds[: first + 1]
    )
    official_cpu = sum(r["cpu_seconds"]["round"] for r in rounds[: first + 1])
    engine, ours, wall, cpu = engine_for(recommended, a.seed), [], 0.0, 0.0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(a.seed)
        for t in range(1, a.tta_rounds + 1):
            start, cpu_start = time.perf_counter(), time.process_time()
            rec = engine.run_round(recommended.algorithm, t, a.tta_rounds)
            wall += time.perf_counter() - start
            cpu += time.process_time() - cpu_start
            ours.append({"round": t, "seconds": wall, "cpu_seconds": cpu, "K": rec["K"],
                         "cluster_model": rec["mean_accuracy"]["cluster_model"],
                         "loadavg": os.getloadavg()[0]})  # fmt: skip
            # Stop at the target, or once cosmosfl has used the official code's whole time.
            if rec["mean_accuracy"]["cluster_model"] >= target or wall >= official_s:
                break
    engine.close()
    reached = ours[-1]["cluster_model"] >= target
    return {
        "target": target,
        "official_round": first + 1,
        "official_seconds": official_s,
        "official_cpu_seconds": official_cpu,  # rounds only (setup not timed in CPU)
        "cosmosfl_cpu_seconds": cpu if reached else None,
        "cpu_ratio": official_cpu / cpu if reached else None,
        "cosmosfl_rounds": ours,
        "cosmosfl_reached": reached,
        "cosmosfl_seconds": wall if reached else None,
        "ratio": official_s / wall if reached else None,
        "config": a.config,
        "client_models": recommended.client_models,
    }


def _clusters(official: dict[str, list[int]] | None, ours: dict[str, int]) -> tuple[str, str]:
    theirs = sorted(sorted(v) for v in (official or {}).values())
    mine: dict[int, list[int]] = {}
    for c, k in ours.items():
        mine.setdefault(k, []).append(int(c))
    return str(theirs), str(sorted(sorted(v) for v in mine.values()))


def render(result: dict[str, Any]) -> str:
    """The three tables as Markdown."""
    return "\n".join(_same_work(result) + _same_answer(result) + _tta(result))


def _same_work(result: dict[str, Any]) -> list[str]:
    sw = result["same_work"]
    off = per_round([official_phases(r) for r in sw["official_rounds"]])
    our = per_round([cosmosfl_phases(r) for r in sw["cosmosfl_rounds"]])
    lines = [
        "## Same work: seconds per round by phase (steady-state round)",
        "",
        "| phase | official | cosmosfl | official / cosmosfl |",
        "|---|---|---|---|",
    ]
    rows = [(p, off[p], our[p]) for p in PHASES]
    rows.append(
        (
            "training (local + server + client distillation)",
            sum(off[k] for k in TRAINING),
            sum(our[k] for k in TRAINING),
        )
    )
    rows.append(("**round**", sum(off.values()), sum(our.values())))
    # Process CPU seconds of the last round (with client distillation on both sides).
    cpu_off = sw["official_rounds"][-1].get("cpu_seconds", {}).get("round", 0.0)
    cpu_our = sw["cosmosfl_rounds"][-1].get("cpu", 0.0)
    rows.append(("process CPU s, last round", cpu_off, cpu_our))
    lines += [f"| {name} | {o:.1f} | {c:.1f} | {_ratio(o, c)} |" for name, o, c in rows]
    steps = sw["alexnet_step_seconds"]
    so, sc = statistics.median(steps["official"]), statistics.median(steps["cosmosfl"])
    params = sw["alexnet_parameters"]
    lines += [
        "",
        f"AlexNet training step (batch 32), median: official (torch "
        f"{sw['official_ready']['torch']}) {so:.3f} s, cosmosfl (torch {torch.__version__}) "
        f"{sc:.3f} s, ratio {_ratio(so, sc)}. Parameters: official {params['official']:,}, "
        f"cosmosfl {params['cosmosfl']:,}; same shapes: {params['same_shapes']}.",
    ]
    return lines


def _same_answer(result: dict[str, Any]) -> list[str]:
    sw = result["same_work"]
    lines = [
        "",
        "## Same answer: mean accuracy per round on each client's test split",
        "",
        "| round | official own cluster (`_1`) | official `_1_max` (oracle) "
        "| cosmosfl cluster model | official client (after local CE) | cosmosfl f_i^(t,1) |",
        "|---|---|---|---|---|---|",
    ]
    for r, rec in zip(sw["official_rounds"], sw["cosmosfl_rounds"], strict=True):
        acc = rec["mean_accuracy"]
        lines.append(
            f"| {r['round'] + 1} | {official_accuracy(r):.3f} "
            f"| {official_accuracy(r, 'server_accuracy_per_client_1_max'):.3f} "
            f"| {acc['cluster_model']:.3f} "
            f"| {official_accuracy(r, 'client_accuracy_per_client_1'):.3f} | {acc['local']:.3f} |"
        )
    off, our = sw["official_rounds"][0], sw["cosmosfl_rounds"][0]
    theirs, mine = _clusters(off["clusters"], our["clusters"])
    lines += [
        "",
        f"- official: B = {off['beta']:.1f} (Frobenius norm of the |U| x M difference, "
        f"0.1 grid, K <= 5), K = {off['num_clusters']}, clusters {theirs}",
        f"- cosmosfl: B0 = {our['threshold']:.4f} (mean per-sample L2, smallest B0 giving "
        f"K <= 5), K = {our['K']}, clusters {mine}",
        f"- true class group of each client id: {result['split']['client_group']}",
    ]
    n, k = len(result["split"]["client_group"]), off["num_clusters"]
    redo = [
        (r["calls"].get("local", n) - n, r["calls"].get("server_distillation", k) - k)
        for r in sw["official_rounds"]
    ]
    lines.append(f"- official collapse re-runs per round (client rounds, server trainings): {redo}")
    return lines


def _tta(result: dict[str, Any]) -> list[str]:
    tta = result["time_to_accuracy"]
    last = tta["cosmosfl_rounds"][-1]
    if tta["cosmosfl_reached"]:
        ours = f"{tta['cosmosfl_seconds']:.0f}"
    else:
        ours = f"not reached in {last['seconds']:.0f} ({last['cluster_model']:.3f})"
    lines = [
        "",
        "## Time to accuracy",
        "",
        "| run | target (official final own-cluster) | rounds | wall s | process CPU s |",
        "|---|---|---|---|---|",
        f"| official, same-work settings | {tta['target']:.3f} | {tta['official_round']} "
        f"| {tta['official_seconds']:.0f} | {tta.get('official_cpu_seconds') or 0:.0f} |",
        f"| cosmosfl, recommended ({Path(tta['config']).name}) | {tta['target']:.3f} "
        f"| {last['round']} | {ours} | {last.get('cpu_seconds') or 0:.0f} |",
    ]
    if tta["ratio"] is not None:
        lines += [
            "",
            f"Time-to-accuracy ratio (official / cosmosfl): {tta['ratio']:.1f}x wall, "
            f"{tta.get('cpu_ratio') or 0:.1f}x process CPU.",
        ]
    return lines


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b >= 0.05 else "-"


def with_machine(result: dict[str, Any]) -> dict[str, Any]:
    return {"benchmark": "reference", "machine": machine(), "loadavg_end": os.getloadavg(),
            **result}  # fmt: skip
