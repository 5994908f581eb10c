"""Benchmarks that anyone can rerun: `cosmosfl bench NAME` or `python -m benchmarks NAME`.

Each benchmark returns a `Report` (a table, notes and JSON); see benchmarks/README.md for
what each one measures and the latest figures. This package is the benchmark code shipped in
the wheel; the repository's `benchmarks/` folder (not shipped) holds its thin runner, the
development scripts (same_records.py, ...) and the results.
"""

from cosmosfl.bench.runner import BENCHMARKS, main, run_benchmark

__all__ = ["BENCHMARKS", "main", "run_benchmark"]
