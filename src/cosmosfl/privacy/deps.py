"""The optional packages of differential privacy, imported on first use with one clear error."""

from __future__ import annotations

import importlib
from types import ModuleType

INSTALL_HINT = "pip install 'cosmosfl[privacy]'"


class PrivacyUnavailableError(ImportError):
    """opacus or dp-accounting is not installed."""


def require(module: str) -> ModuleType:
    """Import `module` (opacus, dp_accounting), or say which extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = module.split(".")[0].replace("_", "-")
        raise PrivacyUnavailableError(
            f"differential privacy needs {package}, which is not installed: {INSTALL_HINT}"
        ) from err
