"""Thin runner: the benchmark code lives in the package (cosmosfl.bench), so `cosmosfl bench`
works from an installed wheel too."""
