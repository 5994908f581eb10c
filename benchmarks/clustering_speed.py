"""Seconds to cluster N clients: the default (average linkage, K by the silhouette) against the
paper's Algorithm 1 with B0 searched for K <= 5, on planted groups (docs/performance.md).

    python benchmarks/clustering_speed.py --clients 100,1000,3000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cosmosfl.core.cluster_choice import choose_clusters


def planted(n: int, groups: int, seed: int) -> np.ndarray:
    """Normalised ℓ1 distances of n points around `groups` centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(groups, 10))
    x = centres[np.arange(n) % groups] + rng.normal(size=(n, 10))
    d = np.abs(x[:, None] - x[None]).sum(-1)
    return d / d.max()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="100,1000,3000")
    parser.add_argument("--groups", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    choose_clusters(planted(10, 2, 0), "average-linkage", "silhouette")  # imports scipy
    print("| clients | average linkage + silhouette | greedy, B0 for K <= 5 |")
    print("|---|---|---|")
    for n in (int(v) for v in args.clients.split(",")):
        d = planted(n, args.groups, args.seed)
        t = time.perf_counter()
        linked = choose_clusters(d, "average-linkage", "silhouette")
        a = time.perf_counter() - t
        t = time.perf_counter()
        greedy = choose_clusters(d, "greedy", "target", target=5)
        b = time.perf_counter() - t
        k_linked, k_greedy = len(linked.clusters), len(greedy.clusters)
        print(f"| {n} | {a:.2f} s, K = {k_linked} | {b:.2f} s, K = {k_greedy} |")


if __name__ == "__main__":
    main()
