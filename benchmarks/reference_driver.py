"""Runs the official COSMOS code (`MAPL` in benrachmut/cluster_fed_learning) one round at a time,
for benchmarks/reference.py. Not part of cosmosfl: it runs under the official code's own
interpreter (torch 2.14.1 + torchvision 0.29.1, numpy < 2) with the official checkout on
PYTHONPATH, and imports nothing from cosmosfl. It never edits the official files: it imports
`main_`, sets the module-level lists its `__main__` block sets, swaps `create_data` for a split
saved by benchmarks/reference.py, pins the learning rates, and wraps methods to time them.

Protocol with the parent: commands on stdin, one per line (`bench N`: N AlexNet training
steps, `go`: run the next round, `stop`); one JSON object per line on the file descriptor
given by --proto-fd (the official code's own prints go to --log). Each round's reply carries
its seconds by phase, process CPU seconds, the per-client accuracies of the round
(`server_accuracy_per_client_1`, its `_max` oracle, `client_accuracy_per_client_1`), B, K and
the clusters. The driver blocks between rounds, so it uses no CPU while the parent runs its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from typing import Any


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--split", required=True, help="split file written by reference.py")
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=5, help="local, server and client-distill epochs")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lam", type=float, default=5.0)
    p.add_argument("--lr-local", type=float, default=1e-3)
    p.add_argument("--lr-distill", type=float, default=1e-4)
    p.add_argument("--lr-server", type=float, default=1e-3)
    p.add_argument("--cluster-addition", type=int, default=0)
    p.add_argument("--proto-fd", type=int, required=True)
    p.add_argument("--log", required=True, help="file for the official code's prints")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    proto = os.fdopen(a.proto_fd, "w", buffering=1)
    log = open(a.log, "w", buffering=1)  # noqa: SIM115  (open for the whole run)
    os.dup2(log.fileno(), 1)  # the official code prints a line per epoch
    sys.stdout = log

    def send(kind: str, **payload: Any) -> None:
        proto.write(json.dumps({"kind": kind, **payload}, default=float) + "\n")

    import torch

    torch.set_num_threads(a.threads)
    import entities as E
    import main_ as M  # the official entry module; its __main__ block does not run on import
    from config import (
        AlgorithmSelected,
        ClusterTechnique,
        DataSet,
        InputConsistency,
        NetClusterTechnique,
        NetsType,
        ServerFeedbackTechnique,
        ServerInputTech,
        WeightForPS,
        experiment_config,
    )
    from torch.utils.data import TensorDataset

    # -- the split from reference.py, in the layout create_data() returns ------------------
    s = torch.load(a.split)
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in s["clients"]:
        groups.setdefault(c["group"], []).append(c)
    train = {g: [TensorDataset(c["train_x"], c["train_y"]) for c in cs] for g, cs in groups.items()}
    test = {g: [TensorDataset(c["test_x"], c["test_y"]) for c in cs] for g, cs in groups.items()}
    public = TensorDataset(s["U_x"], s["U_y"])
    global_test = TensorDataset(s["Utest_x"], s["Utest_y"])

    # -- configuration, as main_'s __main__ block sets it (COSMOS = MAPL, AlexNet both sides)
    M.seed_num_list, M.data_sets_list = [a.seed], [DataSet.CIFAR10]
    M.num_clients_list, M.num_opt_clusters_list = [len(s["clients"])], [5]
    M.algorithm_selection = AlgorithmSelected.MAPL
    M.nets_types_list_PseudoLabelsClusters = [NetsType.C_alex_S_alex]
    M.net_cluster_technique_list = [NetClusterTechnique.multi_model]
    M.cluster_additions = [a.cluster_addition]
    M.server_input_tech_list = [ServerInputTech.mean]
    M.temp_distil_list_mapl = [1]
    M.server_learning_rate_mapl = [a.lr_server]
    M.client_lr_local_lr_distill_mapl = [(a.lr_local, a.lr_distill)]
    M.consistencies_lambda_mapl = [a.lam]
    M.cluster_technique_list = [ClusterTechnique.greedy_elimination_L2]
    M.server_feedback_technique_list = [ServerFeedbackTechnique.similar_to_cluster]
    M.weights_for_ps_list = [WeightForPS.withWeights]
    M.input_consistency_list = [InputConsistency.withInputConsistency]
    M.num_cluster_list = [5]
    cfg = experiment_config
    cfg.update_num_classes(DataSet.CIFAR10)
    cfg.num_clients = len(s["clients"])
    cfg.is_with_memory_load = False
    cfg.number_of_optimal_clusters = 5
    cfg.identical_clients = cfg.num_clients // 5
    cfg.server_split_ratio, cfg.mix_percentage, cfg.server_data_ratio = 0.2, 0.1, 1
    cfg.alpha_dich, cfg.seed_num = 5, a.seed
    cfg.iterations, cfg.batch_size = a.rounds, a.batch_size
    cfg.epochs_num_input_fine_tune_clients = a.epochs  # local cross-entropy (and E0)
    cfg.epochs_num_train_server = a.epochs
    cfg.epochs_num_train_client = a.epochs  # client distillation
    # What main_'s loop assigns from create_data() (the split is ours, so create_data is not run).
    M.clients_train_data_dict, M.server_train_data = train, public
    M.clients_test_data_dict, M.server_test_data = test, global_test

    # Pin the learning rates after update_net_type (its ordering bug cannot change them).
    original_unt = type(cfg).update_net_type

    def update_net_type(self: Any, net_type: Any) -> None:
        original_unt(self, net_type)
        self.learning_rate_fine_tune_c = a.lr_local
        self.learning_rate_train_c = a.lr_distill
        self.learning_rate_train_s = a.lr_server

    type(cfg).update_net_type = update_net_type

    # -- timing wrappers ---------------------------------------------------------------------
    wall: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def timed(cls: type, name: str, label: str) -> None:
        original = getattr(cls, name)

        def wrapper(self: Any, *args: Any, **kw: Any) -> Any:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return original(self, *args, **kw)
            finally:
                wall[label] += time.perf_counter() - t0
                cpu[label] += time.process_time() - c0
                calls[label] += 1

        setattr(cls, name, wrapper)

    timed(E.Client, "iteration_context", "client_total")
    timed(E.Client, "fine_tune", "local")
    timed(E.Client, "evaluate", "prediction")  # its softmax on U, sent to the server
    for name in ("train_with_consistency_and_weights", "train_with_weights", "train"):
        timed(E.Client, name, "client_distillation")
    timed(E.Server, "iteration_context", "server_total")
    timed(E.Server, "get_pseudo_labels_input_per_cluster", "clustering")
    timed(E.Server, "train_with_consistency", "server_distillation")
    timed(E.Server, "evaluate_results", "server_evaluation")

    clustering: dict[str, Any] = {}
    original_ge = E.Server.greedy_elimination

    def greedy_elimination(self: Any) -> Any:
        result = original_ge(self)
        clustering["clusters"] = {str(k): [int(c) for c in v] for k, v in result.items()}
        clustering["beta"] = float(cfg.beta)
        return result

    E.Server.greedy_elimination = greedy_elimination

    state: dict[str, Any] = {"t": 0, "start": 0.0, "cpu": 0.0}

    def wait() -> None:
        """Block until the parent says `go` (answering `bench` meanwhile); `stop` ends."""
        for line in sys.stdin:
            command = line.split()
            if command[:1] == ["bench"]:
                send("bench", seconds=train_steps(int(command[1])))
            elif command == ["go"]:
                wall.clear(), cpu.clear(), calls.clear()
                state["start"], state["cpu"] = time.perf_counter(), time.process_time()
                return
            else:
                break
        raise SystemExit(0)

    def train_steps(n: int) -> list[float]:
        """Seconds of n Adam steps of the official AlexNet (batch 32, 10 classes)."""
        model = E.AlexNet(num_classes=10)
        opt = torch.optim.Adam(model.parameters(), 1e-3)
        x, y = torch.randn(a.batch_size, 3, 32, 32), torch.randint(0, 10, (a.batch_size,))
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            model.train()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            out.append(time.perf_counter() - t0)
        return out

    original_save = M.save_record_to_results

    def save_record_to_results(record: Any, *args: Any, **kw: Any) -> Any:
        """The end of a round in iterate_fl_clusters: report it, then wait for `go`."""
        t = state["t"]
        result = original_save(record, *args, **kw)
        seconds = dict(wall)
        seconds["round"] = time.perf_counter() - state["start"]
        seconds["client_evaluation"] = seconds.get("client_total", 0.0) - sum(
            seconds.get(k, 0.0) for k in ("local", "prediction", "client_distillation")
        )
        send(
            "round",
            round=t,
            setup_seconds=state.pop("setup", 0.0),
            seconds=seconds,
            cpu_seconds={**cpu, "round": time.process_time() - state["cpu"]},
            calls=dict(calls),
            server_accuracy_per_client_1=_at(record.server_accuracy_per_client_1, t),
            server_accuracy_per_client_1_max=_at(record.server_accuracy_per_client_1_max, t),
            client_accuracy_per_client_1={
                str(c): float(v[t]) for c, v in record.client_accuracy_per_client_1.items()
            },
            beta=clustering.get("beta"),
            num_clusters=int(cfg.num_clusters),
            clusters=clustering.get("clusters"),
            lrs=[
                cfg.learning_rate_fine_tune_c,
                cfg.learning_rate_train_c,
                cfg.learning_rate_train_s,
            ],
        )
        state["t"] = t + 1
        if state["t"] < a.rounds:
            wait()
        return result

    M.save_record_to_results = save_record_to_results
    original_iterate = M.iterate_fl_clusters

    def iterate_fl_clusters(*args: Any, **kw: Any) -> Any:
        """Clients and server models are built: the rest is rounds."""
        state["setup"] = time.perf_counter() - state["start"]
        state["start"], state["cpu"] = time.perf_counter(), time.process_time()
        return original_iterate(*args, **kw)

    M.iterate_fl_clusters = iterate_fl_clusters

    params = sum(p.numel() for p in E.AlexNet(num_classes=10).parameters())
    shapes = [list(p.shape) for p in E.AlexNet(num_classes=10).parameters()]
    send("ready", torch=torch.__version__, threads=torch.get_num_threads(), alexnet_params=params,
         alexnet_shapes=shapes)  # fmt: skip
    wait()
    t0 = time.perf_counter()
    cfg.algorithm_selection = AlgorithmSelected.MAPL
    torch.manual_seed(a.seed)  # as main_'s loop does before run_exp_by_algo
    M.run_exp_by_algo()  # create_clients, Server, iterate_fl_clusters (rounds report above)
    send("done", seconds=time.perf_counter() - t0)
    return 0


def _at(per_client: dict[Any, dict[int, float]], t: int) -> dict[str, float]:
    return {str(c): float(v[t]) for c, v in per_client.items() if t in v}


if __name__ == "__main__":
    sys.exit(main())
