"""Engines run algorithms: in-process simulation (default) and, later, Flower."""

from cosmosfl.engines.simulation import ClientError, SimulationEngine, SimulationResult, simulate

__all__ = ["ClientError", "SimulationEngine", "SimulationResult", "simulate"]
