"""The Flower engine: run any cosmosfl algorithm on Flower (`pip install 'cosmosfl[flower]'`).

- `server_app:app` / `client_app:app`: the ServerApp and ClientApp a Flower app's
  pyproject.toml points at (see `cosmosfl flower app` and docs/flower.md);
- `FlowerFederation`: the algorithms' `Federation` view over Flower's Grid;
- `simulate_on_flower`: a config on Flower's simulation runtime, from Python;
- `launch`: a local deployment (own SuperLink and SuperNodes) for testing.

Submodules import flwr; this package itself does not, so a missing extra is a clear error.
"""

from __future__ import annotations

import importlib.util

FLOWER_MISSING = (
    "the Flower engine needs flwr: pip install 'cosmosfl[flower]' (flwr[simulation]>=1.42,<1.43)"
)


def flower_available() -> bool:
    return importlib.util.find_spec("flwr") is not None
