"""Constraints on hyperparameters that several algorithms share (see core/constraints.py).

An algorithm lists its settings' constraints in `parameter_constraints`; `Algorithm` checks
them when it is built and the config layer before it builds one. The aggregation rule, its
trim fraction and the temperature are core/aggregation.py's, which checks the same objects.
"""

from __future__ import annotations

from cosmosfl.core.aggregation import AGGREGATION, TEMPERATURE, TRIM_FRACTION
from cosmosfl.core.constraints import Interval

EPOCHS = Interval(int, 0)  # pretrain_epochs (E0), local_epochs (E), distill_epochs, ...
CONSISTENCY_WEIGHT = Interval(float, 0, symbol="λ")  # `lam`: the weight of r_B
CLUSTER_COUNT = Interval(int, 1)  # num_clusters of k-means

# The teacher of the soft-label methods (COSMOS, FedMD, COMET): aggregate, then temperature.
TEACHER = {
    "aggregation": AGGREGATION,
    "trim_fraction": TRIM_FRACTION,
    "temperature": TEMPERATURE,
}

__all__ = ["CLUSTER_COUNT", "CONSISTENCY_WEIGHT", "EPOCHS", "TEACHER"]
