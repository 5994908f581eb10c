"""Moved to `cosmosfl.reporting.report`: reports are a layer of their own above the experiment
layer (docs/architecture.md), so that running never imports reporting.

A compatibility shim: `cosmosfl.experiment.report` is the path the API reference gave for
`write_report`, and this module re-exported the names of runset.py and stats.py, so every name
it had is re-exported here unchanged. Nothing in cosmosfl imports it (tests/test_layers.py
places it in the `compat` layer, above reporting).
"""

from cosmosfl.reporting.report import *  # noqa: F403
from cosmosfl.reporting.report import __all__  # noqa: F401
