"""Locating the CIFAR-10 CPU config and data for benchmarks, with clear errors when absent."""

from __future__ import annotations

import os
from pathlib import Path

from cosmosfl.experiment.config import ConfigError, ExperimentConfig, load_config

DEFAULT_CONFIG = "configs/cifar10-cpu.yaml"


def find_data_dir(data_dir: str | None) -> str:
    """--data-dir, else $COSMOSFL_DATA_DIR, else ../shared/data next to the checkout."""
    for candidate in (data_dir, os.environ.get("COSMOSFL_DATA_DIR"), "../shared/data"):
        if candidate and (Path(candidate) / "cifar10_jpeg.npz").is_file():
            return str(candidate)
    raise ConfigError(
        "this benchmark needs CIFAR-10 (cifar10_jpeg.npz); pass --data-dir DIR or set "
        "COSMOSFL_DATA_DIR"
    )


def cifar_config(
    data_dir: str | None, config: str | None, overrides: list[str]
) -> ExperimentConfig:
    """The CIFAR-10 CPU experiment config with `overrides`, single-threaded by default so a
    benchmark does not fight other work for cores."""
    path = config or DEFAULT_CONFIG
    if not Path(path).is_file():
        raise ConfigError(
            f"config {path!r} not found; run from the cosmosfl checkout or pass --config"
        )
    base = [f"data.data_dir={find_data_dir(data_dir)}", "threads=1"]
    return load_config(path, base + overrides)
