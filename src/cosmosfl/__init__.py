"""cosmosfl: model-agnostic personalized federated learning (COSMOS and baselines).

The Python API in one import::

    from cosmosfl import Client, Cosmos, Local, SklearnLearner, TorchLearner, simulate
    from cosmosfl import XGBoostLearner, LightGBMLearner, learner_for_estimator  # tabular

Names are imported on first use, so `cosmosfl --help` does not pay for torch and scikit-learn.
`cosmosfl.__version__` is the installed distribution's version (package metadata).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ALGORITHMS": "cosmosfl.algorithms",
    "Algorithm": "cosmosfl.algorithms",
    "Cosmos": "cosmosfl.algorithms",
    "Local": "cosmosfl.algorithms",
    "register_algorithm": "cosmosfl.algorithms",
    "Client": "cosmosfl.client",
    "RunResult": "cosmosfl.experiment.result",
    "SimulationResult": "cosmosfl.experiment.result",  # RunResult's name until 0.3
    "simulate": "cosmosfl.experiment.inprocess",
    "Learner": "cosmosfl.learners",
    "SklearnLearner": "cosmosfl.learners",
    "TorchLearner": "cosmosfl.learners",
    "XGBoostLearner": "cosmosfl.learners",
    "LightGBMLearner": "cosmosfl.learners",
    "learner_for_estimator": "cosmosfl.learners",
    "ClientRejectedError": "cosmosfl.engines.simulation",
    "ClientRejectedWarning": "cosmosfl.engines.simulation",
    "PreflightError": "cosmosfl.experiment.preflight",
}

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Client",
    "ClientRejectedError",
    "ClientRejectedWarning",
    "Cosmos",
    "Learner",
    "LightGBMLearner",
    "Local",
    "PreflightError",
    "RunResult",
    "SimulationResult",
    "SklearnLearner",
    "TorchLearner",
    "XGBoostLearner",
    "__version__",
    "learner_for_estimator",
    "register_algorithm",
    "simulate",
]

if TYPE_CHECKING:
    __version__: str
    from cosmosfl.algorithms import ALGORITHMS, Algorithm, Cosmos, Local, register_algorithm
    from cosmosfl.client import Client
    from cosmosfl.engines.simulation import ClientRejectedError, ClientRejectedWarning
    from cosmosfl.experiment.inprocess import simulate
    from cosmosfl.experiment.preflight import PreflightError
    from cosmosfl.experiment.result import RunResult, SimulationResult
    from cosmosfl.learners import (
        Learner,
        LightGBMLearner,
        SklearnLearner,
        TorchLearner,
        XGBoostLearner,
        learner_for_estimator,
    )


def _version() -> str:
    """The installed distribution's version; in a checkout that is not installed (only `src` on
    sys.path), the version pyproject.toml declares."""
    from importlib import metadata

    try:
        return metadata.version("cosmosfl")
    except metadata.PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cosmosfl' has no attribute {name!r}")
