"""Hyperparameters that several algorithms share: constraints (see core/constraints.py) and
the local-training schedule.

An algorithm lists its settings' constraints in `parameter_constraints`; `Algorithm` checks
them when it is built and the config layer before it builds one. The aggregation rule, its
trim fraction and the temperature are core/aggregation.py's, which checks the same objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.core.aggregation import AGGREGATION, TEMPERATURE, TRIM_FRACTION
from cosmosfl.core.constraints import Constraint, Interval

EPOCHS = Interval(int, 0)  # pretrain_epochs (E0), local_epochs (E), distill_epochs, ...
CONSISTENCY_WEIGHT = Interval(float, 0, symbol="λ")  # `lam`: the weight of r_B
CLUSTER_COUNT = Interval(int, 1)  # num_clusters of k-means

# The teacher of the soft-label methods (COSMOS, FedMD, COMET): aggregate, then temperature.
TEACHER = {
    "aggregation": AGGREGATION,
    "trim_fraction": TRIM_FRACTION,
    "temperature": TEMPERATURE,
}


@dataclass
class EpochSchedule:
    """The local-training schedule every algorithm that trains clients on private data
    shares, so that a comparison gives them all the same budget under the same names: E0
    (`pretrain_epochs`) for a client's first local training, E (`local_epochs`) after
    (`Algorithm.epochs_for`). Inherit it before `Algorithm`; its fields come first among the
    settings. The centralized reference run takes it too."""

    parameter_constraints: ClassVar[Mapping[str, Constraint]] = {
        "pretrain_epochs": EPOCHS,
        "local_epochs": EPOCHS,
    }

    pretrain_epochs: int = 5  # E0
    local_epochs: int = 5  # E


__all__ = ["CLUSTER_COUNT", "CONSISTENCY_WEIGHT", "EPOCHS", "TEACHER", "EpochSchedule"]
