"""Engines run algorithms: in-process simulation (default) and, later, Flower."""

from cosmosfl.engines.simulation import SimulationEngine, SimulationResult, simulate

__all__ = ["SimulationEngine", "SimulationResult", "simulate"]
