"""Clustering rules against liars, offline: lies injected into saved round-1 labels.

Full Byzantine runs take minutes each (benchmarks/reliability.py). This scores a clustering
method x B0 rule in seconds instead: it takes the round-1 pseudo-labels that
`benchmarks/clustering_rules.py --save-labels DIR` wrote, replaces a seeded 10 % or 20 % of the
clients' labels with the lies of engines/faults.py (random: Dirichlet(1) rows; flip: class
order reversed; fixed: one-hot of class 0), and reports per rule the adjusted Rand index of
the honest clients' clusters against their true groups and how many liars share a cluster with
no honest client.

    python benchmarks/byzantine_rules.py runs/labels/dig10 runs/labels/dig20 runs/labels/fm \
        runs/labels/c10 runs/labels/c10n20
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

from cosmosfl.core import linkage
from cosmosfl.core.cluster_choice import choose_clusters
from cosmosfl.core.clustering import greedy_clustering, pairwise_distances

MODES = ("random", "flip", "fixed")
RULES = {  # name -> (clustering method, B0 rule)
    "greedy, target (paper)": ("greedy", "target"),
    "greedy, silhouette": ("greedy", "silhouette"),
    "average-linkage, silhouette": ("average-linkage", "silhouette"),
    "average-linkage, largest-gap": ("average-linkage", "largest-gap"),
}


def _nearest(d: np.ndarray) -> np.ndarray:
    return (d + np.diag(np.full(len(d), np.inf))).min(axis=1)


def nn_gap_threshold(d: np.ndarray) -> float:
    """Candidate tried (2026-12-01), not adopted: B0 in the widest gap of the sorted
    nearest-neighbour distances, so that clients without a close neighbour (liars, it was
    hoped) stay alone."""
    nn = np.sort(_nearest(d))
    if len(nn) < 2:
        return float(nn[0]) if len(nn) else 0.0
    i = int(np.argmax(np.diff(nn)))
    return float((nn[i] + nn[i + 1]) / 2)


def nn_mad_threshold(d: np.ndarray, c: float = 3.0) -> float:
    """Candidate tried, not adopted: B0 = the largest nearest-neighbour distance that is not an
    outlier (median + 3 MAD)."""
    nn = _nearest(d)
    med = np.median(nn)
    mad = 1.4826 * np.median(np.abs(nn - med)) + 1e-12
    return float(nn[nn <= med + c * mad].max())


def _cut(d: np.ndarray, b0: float) -> list[list[int]]:
    return linkage.cut_at(linkage.average_linkage(d), len(d), b0)


# name -> clusters from (distances, number of true groups); with --candidates
CANDIDATES = {
    "greedy, nn-gap": lambda d, k: greedy_clustering(d, nn_gap_threshold(d)),
    "average-linkage, nn-gap": lambda d, k: _cut(d, nn_gap_threshold(d)),
    "greedy, nn-MAD": lambda d, k: greedy_clustering(d, nn_mad_threshold(d)),
    "average-linkage, nn-MAD": lambda d, k: _cut(d, nn_mad_threshold(d)),
}


def lie(probs: np.ndarray, mode: str, rng: np.random.Generator) -> np.ndarray:
    if mode == "random":
        return rng.dirichlet(np.ones(probs.shape[1]), size=len(probs))
    if mode == "flip":
        return probs[:, ::-1].copy()
    out = np.zeros_like(probs)
    out[:, 0] = 1.0
    return out


def score(truth: list[int], liars: list[int], clusters: list[list[int]]) -> tuple[float, int]:
    """(ARI of the honest clients' clusters against their groups, liars with no honest mate)."""
    label = np.empty(len(truth), dtype=int)
    for k, members in enumerate(clusters):
        label[members] = k
    honest = [i for i in range(len(truth)) if i not in liars]
    ari = adjusted_rand_score(np.asarray(truth)[honest], label[honest])
    isolated = sum(all(label[h] != label[b] for h in honest) for b in liars)
    return float(ari), int(isolated)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("labels", nargs="+", type=Path, help="folders of labels-seed<k>.npz")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument(
        "--candidates", action="store_true", help="also the nearest-neighbour rules tried"
    )
    p.add_argument(
        "--distance", default="l1", help="l1 (the paper's) or l1-chance (core/clustering.py)"
    )
    args = p.parse_args(argv)
    rules = {
        name: (lambda d, k, m=method, r=rule: choose_clusters(d, m, r, target=k).clusters)
        for name, (method, rule) in RULES.items()
    }
    if args.candidates:
        rules.update(CANDIDATES)
    results: dict[tuple[str, float, str], list[tuple[float, int, int]]] = {}
    for folder, seed in itertools.product(args.labels, [int(s) for s in args.seeds.split(",")]):
        with np.load(folder / f"labels-seed{seed}.npz") as saved:
            probs, truth = saved["probs"], [int(g) for g in saved["groups"]]
        n, k = len(truth), len(set(truth))
        for fraction, mode in [(0.0, "none"), *itertools.product((0.1, 0.2), MODES)]:
            rng = np.random.default_rng(seed * 100 + int(fraction * 100))
            liars = sorted(rng.choice(n, size=round(fraction * n), replace=False).tolist())
            p_lied = probs.copy()
            for b in liars:
                p_lied[b] = lie(p_lied[b], mode, np.random.default_rng(b))
            d = pairwise_distances(list(p_lied), args.distance)
            for name, rule_fn in rules.items():
                clusters = rule_fn(d, k)
                ari, isolated = score(truth, liars, clusters)
                results.setdefault((name, fraction, mode), []).append((ari, isolated, len(liars)))
    print("| rule | liars | mode | honest ARI, mean (min) | liars isolated |")
    print("|---|---|---|---|---|")
    for (name, fraction, mode), rows in sorted(results.items()):
        ari = np.array([r[0] for r in rows])
        isolated, liars = sum(r[1] for r in rows), sum(r[2] for r in rows)
        iso = f"{isolated} of {liars}" if liars else "—"
        print(f"| {name} | {fraction:.0%} | {mode} | {ari.mean():.2f} ({ari.min():.2f}) | {iso} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
