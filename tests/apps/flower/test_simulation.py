"""The deprecated module name apps/flower/simulation.py (now simulation_runtime.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")
pytest.importorskip("ray", reason="Flower's simulation runtime needs flwr[simulation]")

from cosmosfl.apps.flower.simulation_runtime import simulate_on_flower


def test_the_old_module_name_still_imports_with_a_deprecation_warning() -> None:
    import importlib
    import sys

    sys.modules.pop("cosmosfl.apps.flower.simulation", None)
    with pytest.warns(DeprecationWarning, match="import cosmosfl.apps.flower.simulation_runtime"):
        old = importlib.import_module("cosmosfl.apps.flower.simulation")
    assert old.simulate_on_flower is simulate_on_flower
