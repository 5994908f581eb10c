"""cosmosfl: model-agnostic personalized federated learning (COSMOS and baselines).

The Python API in one import::

    from cosmosfl import Client, Cosmos, Local, SklearnLearner, TorchLearner, simulate

Names are imported on first use, so `cosmosfl --help` does not pay for torch and scikit-learn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "ALGORITHMS": "cosmosfl.algorithms",
    "Algorithm": "cosmosfl.algorithms",
    "Cosmos": "cosmosfl.algorithms",
    "Local": "cosmosfl.algorithms",
    "Client": "cosmosfl.client",
    "SimulationResult": "cosmosfl.engines",
    "simulate": "cosmosfl.engines",
    "Learner": "cosmosfl.learners",
    "SklearnLearner": "cosmosfl.learners",
    "TorchLearner": "cosmosfl.learners",
}

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Client",
    "Cosmos",
    "Learner",
    "Local",
    "SimulationResult",
    "SklearnLearner",
    "TorchLearner",
    "__version__",
    "simulate",
]

if TYPE_CHECKING:
    from cosmosfl.algorithms import ALGORITHMS, Algorithm, Cosmos, Local
    from cosmosfl.client import Client
    from cosmosfl.engines import SimulationResult, simulate
    from cosmosfl.learners import Learner, SklearnLearner, TorchLearner


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cosmosfl' has no attribute {name!r}")
