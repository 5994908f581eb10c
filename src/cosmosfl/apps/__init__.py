"""Applications built on the experiment layer for a runtime other than the command line.

`apps.flower`: the Flower ServerApp and ClientApp, the app's pyproject, the local launcher.
"""
