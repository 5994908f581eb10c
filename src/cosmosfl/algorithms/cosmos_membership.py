"""COSMOS's cluster membership π: who belongs to which cluster, and how late joiners find one.

Step 2 of a round (docs/cosmos.md, "One round, step by step"; the paper's PTC step 2): round 1
clusters the clients that answered (Algorithm 1 at B0, or the alternatives of
core/cluster_choice.py); with `recluster` every round does. A client that missed the
clustering (offline, or its reply was refused) joins later by Algorithm 1's own criterion: the
cluster of its nearest clustered client if that client is B0-close, else a new cluster with the
other newcomers close to it (docs/cosmos.md, "Missing replies").

`Membership` reads the clustering settings from the `CosmosSettings` it is given (never a
copy) and holds π; `update` returns the assignment and which clusters are new (and which old
cluster each new one inherits its model from). It never touches a model: `Cosmos`
(cosmos.py) owns the server models h_k and builds them from that.

The distances, by name (docs/cosmos.md, "The thresholds, by name"): `b0` is B0 fixed by the
user; `b0_used` the B0 the last clustering used (fixed, or chosen by `b0_rule`, searched by
`b0_search`); `join_distance` how close a newcomer must be to join a cluster (B0 itself when
fixed; with a searched B0, the end of the interval of B0s giving the same clusters).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from cosmosfl.algorithms.cosmos_settings import CosmosSettings


@dataclass(frozen=True)
class MembershipUpdate:
    """What one `Membership.update` decided, for the owner of the server models."""

    assignment: dict[int, int]  # π after the update: client -> cluster
    # True: a (re-)clustering, every cluster is new and the old ones are gone; False: the old
    # clusters stay as they were and only `new_clusters` are added.
    reclustered: bool
    # Each new cluster -> the old cluster whose model it inherits (the one most of its members
    # came from), or None for a fresh model. In cluster order.
    new_clusters: dict[int, int | None]


@dataclass
class Membership:
    """π for COSMOS and the clustering's state; the clustering settings are read from
    `settings` (the `Cosmos` itself) whenever they are needed."""

    settings: CosmosSettings = field(repr=False)

    assignment: dict[int, int] = field(default_factory=dict)  # π
    b0_used: float | None = None
    join_distance: float | None = None
    # While some client has never answered: each client's latest pseudo-labels, to place
    # newcomers next to clustered clients absent in their round.
    last_probs: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def num_clusters(self) -> int:
        return len(set(self.assignment.values()))

    def update(
        self, probs: dict[int, np.ndarray], fed: Federation, round_num: int
    ) -> MembershipUpdate:
        """Cluster (round 1, or every round with `recluster`) or place this round's newcomers
        (clients with pseudo-labels in `probs` but no cluster yet)."""
        seen = {**self.last_probs, **probs}
        if round_num == 1 or self.settings.recluster or not self.assignment:
            change = self._cluster(probs, fed)
        elif set(probs) - set(self.assignment) and self._uninformative():
            # Round 1 had no more answers than target_clusters: every client is a
            # singleton and B0 says nothing yet, so cluster everyone seen so far.
            change = self._cluster(seen, fed)
        else:
            change = self._place_newcomers(probs, fed)
        if self.settings.recluster or set(self.assignment) >= set(fed.client_ids):
            self.last_probs = {}  # every client placed: the clustering is final
        else:
            self.last_probs = seen
        return change

    def _cluster(self, probs: dict[int, np.ndarray], fed: Federation) -> MembershipUpdate:
        ids = sorted(probs)
        d = self._distances([probs[c] for c in ids], fed)
        # How close a newcomer must be to join: Algorithm 1's B0 when the user fixed it; with a
        # searched B0 (the smallest for K, right at a within-group distance) the end of the
        # interval of B0s giving these clusters. Only needed while some client is missing
        # from the clustering.
        missing = (
            self.settings.b0 is None
            and not self.settings.recluster
            and not set(ids) >= set(fed.client_ids)
        )
        chosen = choose_clusters(
            d,
            self.settings.clustering,
            self.settings.b0_rule_used,
            threshold=self.settings.b0,
            target=self.settings.target_clusters_used,
            search=self.settings.b0_search,
            need_join=missing,
        )
        clusters, b0 = chosen.clusters, chosen.threshold
        pi = assignment_from_clusters(clusters, len(ids))
        old_assignment = self.assignment
        self.assignment = {cid: int(pi[i]) for i, cid in enumerate(ids)}
        self.b0_used = b0
        self.join_distance = chosen.join if chosen.join is not None else b0
        inherits: dict[int, int | None] = {}
        for k, members in iter_clusters(self.assignment):
            # Re-clustering: a new cluster inherits the model most of its members came from.
            previous = [old_assignment[c] for c in members if c in old_assignment]
            inherits[k] = max(sorted(set(previous)), key=previous.count) if previous else None
        fed.log(
            f"clustering: K={len(clusters)} with B0={b0:.4f} ({self.settings.clustering}, "
            f"{self.settings.distance} distance)"
        )
        return MembershipUpdate(dict(self.assignment), True, inherits)

    def _distances(self, labels: list[np.ndarray], fed: Federation) -> np.ndarray:
        """The clustering's distances between these pseudo-label matrices (same settings and
        row sample for the round-1 clustering and for placing newcomers)."""
        return pairwise_distances(
            labels,
            self.settings.distance,
            sample=self.settings.distance_sample,
            seed=derive_seed(fed.seed, "cosmos-distance-sample") % 2**32,
            backend=self.settings.distance_backend,
        )

    def _uninformative(self) -> bool:
        """A searched clustering in which every client is alone (B0 = 0 or K = 1 client)."""
        return self.settings.b0 is None and self.num_clusters >= len(self.assignment)

    def _place_newcomers(self, probs: dict[int, np.ndarray], fed: Federation) -> MembershipUpdate:
        """Clients answering for the first time (they missed the clustering) join by Algorithm
        1's own criterion: the cluster of their nearest clustered client if that client is
        B0-close (labels of this round, or the last ones it sent); newcomers close to nobody
        are clustered among themselves with the same B0 into new clusters. With average
        linkage, "close" is the mean distance to a cluster's members. Existing clusters are
        left alone."""
        newcomers = sorted(c for c in probs if c not in self.assignment)
        if not newcomers:
            return MembershipUpdate(dict(self.assignment), False, {})
        b0 = float(self.b0_used)  # type: ignore[arg-type]
        join = self.join_distance if self.join_distance is not None else b0
        latest = {**self.last_probs, **probs}
        known = sorted(c for c in self.assignment if c in latest)
        ids = known + newcomers
        d = self._distances([latest[c] for c in ids], fed)
        lonely = []
        if self.settings.clustering == "average-linkage":
            # Average linkage's own criterion: the mean distance to a cluster's members.
            lonely = self._join_by_mean(d, known, newcomers, b0, join)
        else:
            for i, cid in enumerate(newcomers, start=len(known)):
                j = int(np.argmin(d[i, : len(known)])) if known else -1
                if j >= 0 and (d[i, j] <= b0 or d[i, j] < join):
                    self.assignment[cid] = self.assignment[known[j]]
                else:
                    lonely.append(i)
        groups: list[list[int]] = []
        if lonely and self.settings.clustering == "average-linkage":
            sub = d[np.ix_(lonely, lonely)]
            groups = linkage.cut_at(linkage.average_linkage(sub), len(lonely), b0)
        elif lonely:
            sub = d[np.ix_(lonely, lonely)]
            # The same closeness as for joining: d <= B0 or d < join.
            below = sub[sub < join]
            groups = greedy_clustering(sub, max(b0, float(below.max())) if below.size else b0)
        new = self._new_clusters([[ids[lonely[m]] for m in g] for g in groups])
        fed.log(
            f"clustering: {len(newcomers)} newcomer(s) placed, {len(lonely)} in new clusters "
            f"(K={self.num_clusters})"
        )
        return MembershipUpdate(dict(self.assignment), False, dict.fromkeys(new))

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

    def _new_clusters(self, groups: list[list[int]]) -> list[int]:
        """Give each group a new cluster number after the existing ones; returns them."""
        next_k = max(self.assignment.values(), default=-1) + 1
        for n, group in enumerate(groups):
            for cid in group:
                self.assignment[cid] = next_k + n
        return [next_k + n for n in range(len(groups))]


def inherit_state(source: object, own: object) -> object:
    """The source model's weights with the new model's own RNG state (TorchLearner states),
    so that clusters inheriting one model do not shuffle and augment in lockstep."""
    if isinstance(source, dict) and isinstance(own, dict) and "generator" in own:
        return {**source, "generator": own["generator"]}
    return source


__all__ = ["Membership", "MembershipUpdate", "inherit_state"]
