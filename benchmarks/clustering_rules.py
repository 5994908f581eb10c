"""How well each rule for B0 recovers the true class groups, on a config's round-1 labels.

COSMOS clusters once, on the pseudo-labels f_i^(1,1)(U) the clients send after E0 epochs of
local pre-training. This script trains exactly that (each client's learner, seeded as in a run,
E0 epochs on its private data), then applies every B0 rule, with Algorithm 1 and with average
linkage, and for reference k-means with K = the number of class groups (COMET's clustering) to
the same labels, and prints K and the adjusted Rand index against the true groups. Minutes
instead of a full run per rule; --save-labels / --labels keep the labels for later.

    python benchmarks/clustering_rules.py -c configs/fmnist-paper.yaml --data-dir ../shared/data \
        --seeds 1,2,3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from cosmosfl.core.cluster_choice import CLUSTERINGS, ClientClusters, choose_clusters
from cosmosfl.core.clustering import THRESHOLD_RULES, pairwise_distances
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import ExperimentConfig, load_config


def rules(d: np.ndarray, k: int) -> dict[str, ClientClusters]:
    """Every clustering method x B0 rule, on the same distances."""
    out = {}
    for method in CLUSTERINGS:
        for rule in THRESHOLD_RULES:
            if method == "average-linkage" and rule == "widest-interval":
                continue  # the same as largest-gap on a dendrogram
            name = f"{method}, {rule}" + (
                f" (K <= {k}, the paper's tuning)" if rule == "target" else ""
            )
            out[name] = choose_clusters(d, method, rule, target=k)
    return out


def round_one_labels(cfg: ExperimentConfig) -> tuple[list[np.ndarray], list[int]]:
    """Each client's f_i^(1,1)(U) after E0 epochs, trained as a run trains it, and its group."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    exp = build_experiment(cfg)
    e0 = int(cfg.algorithm.get("pretrain_epochs", 5))
    probs = []
    for client in exp.clients:
        client.learner.fit(*client.train, epochs=e0)
        probs.append(client.learner.predict_proba(exp.public_x))
    return probs, [int(exp.partition.client_group[c.id]) for c in exp.clients]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-c", "--config", required=True)
    p.add_argument("--data-dir")
    p.add_argument("--seeds", default="1")
    p.add_argument(
        "--save-labels",
        metavar="DIR",
        help="also write each seed's round-1 labels and true groups to DIR/labels-seed<k>.npz",
    )
    p.add_argument(
        "--labels",
        metavar="DIR",
        help="read the labels written by --save-labels instead of training (seconds, not minutes)",
    )
    p.add_argument("overrides", nargs="*")
    args = p.parse_args()
    out = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        overrides = [*args.overrides, f"seed={seed}"]
        if args.data_dir:
            overrides.append(f"data.data_dir={args.data_dir}")
        cfg = load_config(args.config, overrides)
        k = int(cfg.data.num_groups)
        if args.labels:
            with np.load(Path(args.labels) / f"labels-seed{seed}.npz") as saved:
                probs, truth = list(saved["probs"]), [int(g) for g in saved["groups"]]
        else:
            probs, truth = round_one_labels(cfg)
        if args.save_labels:
            Path(args.save_labels).mkdir(parents=True, exist_ok=True)
            np.savez_compressed(
                Path(args.save_labels) / f"labels-seed{seed}.npz",
                probs=np.stack(probs),
                groups=np.asarray(truth),
            )
        d = pairwise_distances(probs, "l1")
        for name, chosen in rules(d, k).items():
            clusters, b0 = chosen.clusters, chosen.threshold
            found = np.empty(len(truth), dtype=int)
            for j, members in enumerate(clusters):
                found[members] = j
            ari = adjusted_rand_score(truth, found)
            out.append({"seed": seed, "rule": name, "B0": b0, "K": len(clusters), "ARI": ari})
        flat = np.stack([q.ravel() for q in probs])
        km = KMeans(k, n_init=10, random_state=seed).fit_predict(flat)
        out.append(
            {
                "seed": seed,
                "rule": f"k-means, K = {k} (COMET)",
                "B0": None,
                "K": k,
                "ARI": adjusted_rand_score(truth, km),
            }
        )
        within = d[np.equal.outer(truth, truth) & ~np.eye(len(truth), dtype=bool)]
        between = d[~np.equal.outer(truth, truth)]
        print(
            f"seed {seed}: distances within groups {within.min():.3f}-{within.max():.3f} "
            f"(mean {within.mean():.3f}), between groups {between.min():.3f}-{between.max():.3f} "
            f"(mean {between.mean():.3f})"
        )
        for row in out[-(len(rules(d, k)) + 1) :]:
            b0 = "" if row["B0"] is None else f"B0 = {row['B0']:.3f}, "
            print(f"  {row['rule']:52s} {b0}K = {row['K']}, ARI = {row['ARI']:.3f}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
