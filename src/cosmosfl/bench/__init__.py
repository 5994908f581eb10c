"""Benchmarks that anyone can rerun: `cosmosfl bench NAME` or `python -m benchmarks NAME`.

Each benchmark returns a `Report` (a table, notes and JSON); see benchmarks/README.md for
what each one measures and the latest figures.
"""

from cosmosfl.bench.runner import BENCHMARKS, main, run_benchmark

__all__ = ["BENCHMARKS", "main", "run_benchmark"]
