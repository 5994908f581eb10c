"""Model selection on a client's validation slice (a COSMOS extension, off by default).

COSMOS reports the cluster model h_π(i). Where a client's data differs from its cluster's (the
paper split deals 10 % of every client's data out of a shared pool), the client's own model can
be the better one; the client can tell which on private data that neither model trained on.
"""

from __future__ import annotations

from collections.abc import Mapping

from cosmosfl.algorithms.base import DeferredMetrics, Federation, Metrics, evaluate_clients
from cosmosfl.learners.base import Learner


def select_on_validation(
    fed: Federation,
    models: Mapping[int, Learner],
    h_test: Metrics,
    own_test: Metrics,
) -> Metrics:
    """Per client, the test metrics of whichever of h_π(i) and its own f_i^(t,1) scores higher
    on the client's validation slice (ties: h_π(i)); clients missing a measurement are left
    out. Computed when first read, like the measurements it combines."""
    h_val = fed.evaluate_server_models(models, split="validation")
    own_val = evaluate_clients(fed, sorted(models), split="validation")

    def pick() -> dict[int, dict[str, float]]:
        out = {}
        for cid in sorted(set(h_val) & set(own_val) & set(h_test) & set(own_test)):
            h_wins = h_val[cid]["top1"] >= own_val[cid]["top1"]
            out[cid] = {
                **(h_test if h_wins else own_test)[cid],
                "chose_cluster_model": float(h_wins),
            }
        return out

    return DeferredMetrics(pick)
