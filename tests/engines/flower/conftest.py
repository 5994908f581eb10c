"""Each test's ClientApp starts from a fresh process cache, as a new Flower run's processes do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_client_app_cache() -> Iterator[None]:
    try:
        from cosmosfl.apps.flower import client_app
    except ImportError:  # Flower not installed: those tests skip themselves
        yield
        return
    client_app._CLIENTS.clear()
    client_app._HANDLERS.clear()
    yield
    client_app._CLIENTS.clear()
    client_app._HANDLERS.clear()
