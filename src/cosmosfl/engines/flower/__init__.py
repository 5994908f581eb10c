"""The Flower engine: a `Federation` over Flower's Grid (`pip install 'cosmosfl[flower]'`).

- `FlowerFederation` (`federation`): the algorithms' `Federation` view over Flower's Grid;
- `codec`: protocol messages to Flower records and back.

The apps a Flower deployment runs (ServerApp, ClientApp, the app's pyproject, the local
launcher) know configs and run directories, so they live a layer up, in `cosmosfl.apps.flower`.
Submodules import flwr; this package itself does not, so a missing extra is a clear error.
"""

from __future__ import annotations

import importlib.util

FLOWER_MISSING = (
    "the Flower engine needs flwr: pip install 'cosmosfl[flower]' (flwr[simulation]>=1.42,<1.43)"
)


def flower_available() -> bool:
    return importlib.util.find_spec("flwr") is not None
