"""COSMOS's cluster membership: who belongs to which cluster, and how late joiners find one.

Round 1 clusters the clients that answered (Algorithm 1 at threshold B0, or the alternatives
of core/cluster_choice.py); with `recluster` every round does. A client that missed the
clustering (offline, or its reply was refused) joins later by Algorithm 1's own criterion:
the cluster of its nearest clustered client if that client is B0-close, else a new cluster
with the other newcomers close to it. This module holds those steps; `Cosmos` (cosmos.py)
runs the round around them and owns the server models they create.

The thresholds, for a reader meeting them here: `threshold` is B0 when the user fixes it;
`threshold_used` is the B0 the last clustering used (fixed or chosen by `threshold_rule`,
searched by `threshold_search`); `join_threshold` is how close a newcomer must be to join a
cluster (B0 itself when fixed; with a searched B0, the end of the interval of thresholds that
give the same clusters).
"""

from __future__ import annotations

import numpy as np

from cosmosfl.algorithms.base import Federation, iter_clusters
from cosmosfl.core import linkage
from cosmosfl.core.cluster_choice import choose_clusters
from cosmosfl.core.clustering import (
    assignment_from_clusters,
    greedy_clustering,
    pairwise_distances,
)
from cosmosfl.core.seeds import derive_seed
from cosmosfl.learners.base import Learner


class ClusterMembership:
    """The clustering steps of `Cosmos`, which it inherits; they read its settings
    (`threshold`, `target_clusters`, `threshold_rule`, `threshold_search`, `clustering`,
    `distance*`, `recluster`) and keep its state (`assignment` π, `cluster_models` h_k,
    `threshold_used`, `join_threshold`, `_last_probs`)."""

    threshold: float | None
    target_clusters: int | None
    threshold_rule: str
    threshold_search: str
    clustering: str
    distance: str
    distance_sample: int | None
    distance_backend: str
    recluster: bool
    assignment: dict[int, int]
    cluster_models: dict[int, Learner]
    threshold_used: float | None
    join_threshold: float | None
    _last_probs: dict[int, np.ndarray]

    def _new_server_model(self, fed: Federation, k: int) -> Learner:
        raise NotImplementedError

    def _update_membership(
        self, probs: dict[int, np.ndarray], fed: Federation, round_num: int
    ) -> None:
        """Cluster (round 1, or every round with `recluster`) or place this round's newcomers."""
        seen = {**self._last_probs, **probs}
        if round_num == 1 or self.recluster or not self.assignment:
            self._cluster(probs, fed)
        elif set(probs) - set(self.assignment) and self._uninformative():
            # Round 1 had no more answers than target_clusters: every client is a
            # singleton and B0 says nothing yet, so cluster everyone seen so far.
            self._cluster(seen, fed)
        else:
            self._place_newcomers(probs, fed)
        if self.recluster or set(self.assignment) >= set(fed.client_ids):
            self._last_probs = {}  # every client placed: the clustering is final
        else:
            self._last_probs = seen

    def _cluster(self, probs: dict[int, np.ndarray], fed: Federation) -> None:
        ids = sorted(probs)
        d = self._distances([probs[c] for c in ids], fed)
        # How close a newcomer must be to join: Algorithm 1's B0 when the user fixed it; with a
        # searched B0 (the smallest for K, right at a within-group distance) the end of the
        # interval of thresholds giving these clusters. Only needed while some client is
        # missing from the clustering.
        missing = (
            self.threshold is None and not self.recluster and not set(ids) >= set(fed.client_ids)
        )
        chosen = choose_clusters(
            d,
            self.clustering,
            self.threshold_rule,
            threshold=self.threshold,
            target=self.target_clusters,
            search=self.threshold_search,
            need_join=missing,
        )
        clusters, b0 = chosen.clusters, chosen.threshold
        pi = assignment_from_clusters(clusters, len(ids))
        old_assignment, old_models = self.assignment, self.cluster_models
        self.assignment = {cid: int(pi[i]) for i, cid in enumerate(ids)}
        self.threshold_used = b0
        self.join_threshold = chosen.join if chosen.join is not None else b0
        self.cluster_models = {}
        for k, members in iter_clusters(self.assignment):
            self.cluster_models[k] = self._new_server_model(fed, k)
            # Re-clustering: a new cluster inherits the model most of its members came from.
            previous = [old_assignment[c] for c in members if c in old_assignment]
            if previous:
                source = max(sorted(set(previous)), key=previous.count)
                self.cluster_models[k].set_state(
                    inherit_state(
                        old_models[source].get_state(), self.cluster_models[k].get_state()
                    )
                )
        fed.log(
            f"clustering: K={len(clusters)} with B0={b0:.4f} ({self.clustering}, "
            f"{self.distance} distance)"
        )

    def _distances(self, labels: list[np.ndarray], fed: Federation) -> np.ndarray:
        """The clustering's distances between these pseudo-label matrices (same settings and
        row sample for the round-1 clustering and for placing newcomers)."""
        return pairwise_distances(
            labels,
            self.distance,
            sample=self.distance_sample,
            seed=derive_seed(fed.seed, "cosmos-distance-sample") % 2**32,
            backend=self.distance_backend,
        )

    def _uninformative(self) -> bool:
        """A searched clustering in which every client is alone (B0 = 0 or K = 1 client)."""
        return self.threshold is None and len(self.cluster_models) >= len(self.assignment)

    def _place_newcomers(self, probs: dict[int, np.ndarray], fed: Federation) -> None:
        """Clients answering for the first time (they missed the clustering) join by Algorithm
        1's own criterion: the cluster of their nearest clustered client if that client is
        B0-close (labels of this round, or the last ones it sent); newcomers close to nobody
        are clustered among themselves with the same B0 into new clusters. With average
        linkage, "close" is the mean distance to a cluster's members. Existing clusters and
        their models are left alone."""
        newcomers = sorted(c for c in probs if c not in self.assignment)
        if not newcomers:
            return
        b0 = float(self.threshold_used)  # type: ignore[arg-type]
        join = self.join_threshold if self.join_threshold is not None else b0
        latest = {**self._last_probs, **probs}
        known = sorted(c for c in self.assignment if c in latest)
        ids = known + newcomers
        d = self._distances([latest[c] for c in ids], fed)
        lonely = []
        if self.clustering == "average-linkage":
            # Average linkage's own criterion: the mean distance to a cluster's members.
            lonely = self._join_by_mean(d, known, newcomers, b0, join)
        else:
            for i, cid in enumerate(newcomers, start=len(known)):
                j = int(np.argmin(d[i, : len(known)])) if known else -1
                if j >= 0 and (d[i, j] <= b0 or d[i, j] < join):
                    self.assignment[cid] = self.assignment[known[j]]
                else:
                    lonely.append(i)
        if lonely and self.clustering == "average-linkage":
            sub = d[np.ix_(lonely, lonely)]
            groups = linkage.cut_at(linkage.average_linkage(sub), len(lonely), b0)
            self._new_clusters(fed, [[ids[lonely[m]] for m in g] for g in groups])
        elif lonely:
            sub = d[np.ix_(lonely, lonely)]
            # The same closeness as for joining: d <= B0 or d < join.
            below = sub[sub < join]
            thr = max(b0, float(below.max())) if below.size else b0
            groups = greedy_clustering(sub, thr)
            self._new_clusters(fed, [[ids[lonely[m]] for m in g] for g in groups])
        fed.log(
            f"clustering: {len(newcomers)} newcomer(s) placed, {len(lonely)} in new clusters "
            f"(K={len(self.cluster_models)})"
        )

    def _join_by_mean(
        self, d: np.ndarray, known: list[int], newcomers: list[int], b0: float, join: float
    ) -> list[int]:
        """Place newcomers (rows after `known` in d) in the cluster of smallest mean distance if
        it is within the cut; returns the rows of those placed nowhere."""
        lonely = []
        members: dict[int, list[int]] = {}
        for j, cid in enumerate(known):
            members.setdefault(self.assignment[cid], []).append(j)
        for i, cid in enumerate(newcomers, start=len(known)):
            means = {k: float(d[i, rows].mean()) for k, rows in sorted(members.items())}
            k = min(means, key=means.__getitem__) if means else None
            if k is not None and (means[k] <= b0 or means[k] < join):
                self.assignment[cid] = k
            else:
                lonely.append(i)
        return lonely

    def _new_clusters(self, fed: Federation, groups: list[list[int]]) -> None:
        next_k = max(self.cluster_models, default=-1) + 1
        for n, group in enumerate(groups):
            for cid in group:
                self.assignment[cid] = next_k + n
            self.cluster_models[next_k + n] = self._new_server_model(fed, next_k + n)


def inherit_state(source: object, own: object) -> object:
    """The source model's weights with the new model's own RNG state (TorchLearner states),
    so that clusters inheriting one model do not shuffle and augment in lockstep."""
    if isinstance(source, dict) and isinstance(own, dict) and "generator" in own:
        return {**source, "generator": own["generator"]}
    return source


__all__ = ["ClusterMembership", "inherit_state"]
