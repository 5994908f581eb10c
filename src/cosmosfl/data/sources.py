"""Datasets of two kinds, images (N, H, W, C) and feature vectors (N, D): where they come from,
how they are validated, and how they become model inputs.

`load_dataset` serves scikit-learn's digits (embedded, no download), user `.npz` files (images
or feature vectors), CSV and Parquet tables, folders of images (one subfolder per class),
named datasets from a data directory (also in their official formats: CIFAR-100's python
pickles, EMNIST's gzip IDX files), and, optionally, torchvision downloads. Every dataset is
checked on load, so a malformed file fails here with a clear message instead of deep inside
training.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.data.dataset import Dataset, ImageDataset, from_arrays
from cosmosfl.data.download import TORCHVISION_DATASETS, fetch_torchvision, torchvision_available
from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.data.npz import read_npz
from cosmosfl.data.splitting import stratified_indices
from cosmosfl.data.tabular import TABLE_SUFFIXES  # read with pandas; Parquet also needs pyarrow

__all__ = [
    "DATASET_NAMES",
    "TABLE_SUFFIXES",
    "Dataset",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "ImageDataset",
    "data_folder",
    "default_cache_dir",
    "load_dataset",
    "resolve_data_path",
    "subsample",
]

DATASET_NAMES: tuple[str, ...] = (
    "digits",
    "cifar10",
    "cifar100",
    "mnist",
    "fashion_mnist",
    "emnist_balanced",
    "tiny_imagenet",
)
# File names looked for in the data directory, in order of preference.
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "cifar10": ("cifar10.npz", "cifar10_jpeg.npz"),
    "cifar100": ("cifar100.npz", "cifar100_jpeg.npz"),
    "mnist": ("mnist.npz",),
    "fashion_mnist": ("fashion_mnist.npz",),
    "emnist_balanced": ("emnist_balanced.npz", "emnist_balanced_partial.npz"),
    "tiny_imagenet": ("tiny_imagenet.npz", "tiny_imagenet_jpeg.npz"),
}
NATURAL_DATASETS = frozenset({"cifar10", "cifar100", "tiny_imagenet"})
# A file's train/test split is part of the dataset, not of a run: every seed of a comparison
# is tested on the same rows (as for digits), and only partitions and initialisations vary.
_DIGITS_SPLIT_SEED = 0
FILE_SPLIT_SEED = 0


# -- loading -----------------------------------------------------------------------------------
def default_cache_dir() -> Path:
    """`$COSMOSFL_CACHE_DIR`, else `$XDG_CACHE_HOME/cosmosfl`, else `~/.cache/cosmosfl`."""
    if env := os.environ.get("COSMOSFL_CACHE_DIR"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "cosmosfl"


def load_dataset(
    name: str | Path,
    data_dir: str | Path | None = None,
    *,
    download: bool = False,
    cache_dir: str | Path | None = None,
    label_column: str | None = None,
    test_fraction: float = 0.2,
    missing: str = "refuse",
    image_size: int = 32,
    sep: str | None = None,
    encoding: str | None = None,
) -> Dataset:
    """Load a dataset by name (see DATASET_NAMES) or from a path: an `.npz` file (images or
    feature vectors), a CSV/Parquet table, or a folder of images (one subfolder per class).

    Named datasets are looked up in `data_dir` (else `$COSMOSFL_DATA_DIR`), as `.npz` files or
    in their official formats; when absent and `download` is set, torchvision fetches them into
    `<cache_dir>/torchvision`. Tables: `label_column` (default: the last column) and `missing`
    ("refuse" or "impute") as `data.tabular.read_table` documents; image folders are resized to
    `image_size` px; `sep` / `encoding` for text tables (default: sniffed / UTF-8). A file
    without a test split gets a stratified `test_fraction` of its rows,
    drawn with a fixed seed: the split belongs to the dataset, not to a run.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    key = str(name).strip()
    canonical = key.lower().replace("-", "_")
    if canonical == "digits":
        return _load_digits()
    if canonical in DATASET_FILES:
        return _load_named(canonical, data_dir, download=download, cache=cache)
    path = resolve_data_path(key, data_dir)
    if path.name.lower().endswith(TABLE_SUFFIXES):
        from cosmosfl.data.tabular import read_table  # imports pandas on use

        arrays = read_table(
            path,
            label_column=label_column,
            test_fraction=test_fraction,
            seed=FILE_SPLIT_SEED,
            missing=missing,
            sep=sep,
            encoding=encoding,
        )
        return from_arrays(_stem(path), arrays, natural=False)
    if path.is_dir():
        from cosmosfl.data.image_folders import read_image_folder

        arrays = read_image_folder(
            path, image_size=image_size, test_fraction=test_fraction, seed=FILE_SPLIT_SEED
        )
        return from_arrays(path.name, arrays, natural=None)
    if path.suffix == ".npz" or path.exists():
        if not path.is_file():
            raise DatasetNotFoundError(f"dataset file {str(path)!r} does not exist")
        if path.suffix != ".npz":
            raise DatasetFormatError(
                f"dataset file {str(path)!r}: unknown format {path.suffix or '(no suffix)'!r}; "
                f"allowed: .npz, {', '.join(TABLE_SUFFIXES)}, or a folder of images"
            )
        return from_arrays(path.stem, read_npz(path, cache), natural=None)
    raise ValueError(
        f"unknown dataset name {key!r}; allowed: {', '.join(DATASET_NAMES)}, or a path to an "
        f".npz file, a table ({', '.join(TABLE_SUFFIXES)}) or a folder of images "
        "(one subfolder per class)"
    )


def data_folder(data_dir: str | Path | None) -> Path | None:
    """The data directory: `data_dir`, else `$COSMOSFL_DATA_DIR`, else None."""
    folder = data_dir if data_dir else os.environ.get("COSMOSFL_DATA_DIR")
    return Path(folder).expanduser() if folder else None


def resolve_data_path(name: str | Path, data_dir: str | Path | None) -> Path:
    """A file a config or a call names: as given when it exists (or is absolute), else inside
    the data directory (`data_folder`) when it is there, else as given (for the caller's "not
    found"). So `--data-dir DIR data.dataset=file.csv` and `sites.public: u.csv` both work."""
    path = Path(name).expanduser()
    if path.exists() or path.is_absolute():
        return path
    folder = data_folder(data_dir)
    if folder is not None and (folder / path).exists():
        return folder / path
    return path


def _stem(path: Path) -> str:
    name = path.name
    for suffix in sorted(TABLE_SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _load_digits() -> ImageDataset:
    """scikit-learn's 8x8 digits, values 0..16 rescaled to 0..255, fixed stratified 75/25 split."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    y = bunch.target.astype(np.int64)
    is_test = np.zeros(len(y), dtype=bool)
    is_test[stratified_indices(y, 0.25, np.random.default_rng(_DIGITS_SPLIT_SEED))] = True
    classes = tuple(str(i) for i in range(10))
    return ImageDataset("digits", x[~is_test], y[~is_test], x[is_test], y[is_test], classes, False)


def _load_named(
    name: str, data_dir: str | Path | None, *, download: bool, cache: Path
) -> ImageDataset:
    natural = name in NATURAL_DATASETS
    data_dir = data_folder(data_dir)
    tried: list[str] = []
    if data_dir is not None:
        for fname in DATASET_FILES[name]:
            path = Path(data_dir).expanduser() / fname
            if path.is_file():
                if "partial" in fname:
                    warnings.warn(
                        f"{name}: using {path}, an incomplete copy of the dataset; results are "
                        "not comparable with published ones (see docs for its size)",
                        stacklevel=3,
                    )
                return from_arrays(name, read_npz(path, cache), natural=natural)
            tried.append(str(path))
        official = _load_official(name, Path(data_dir).expanduser(), tried)
        if official is not None:
            return from_arrays(name, official, natural=natural)
    notes: list[str] = []
    if name in TORCHVISION_DATASETS:
        root = cache / "torchvision"
        if torchvision_available():
            try:
                arrays = fetch_torchvision(name, root, download=download)
            except (OSError, RuntimeError) as exc:  # network errors, corrupt downloads
                notes.append(f"torchvision could not fetch it into {root}: {exc}")
                raise DatasetNotFoundError(
                    _not_found_message(name, data_dir, tried, notes)
                ) from exc
            if arrays is not None:
                return from_arrays(name, arrays, natural=natural)
            tried.append(f"{root} (torchvision files, not downloaded yet)")
        elif download:
            notes.append("download=True needs torchvision, which is not installed")
    elif download:
        notes.append(f"torchvision has no loader for {name}; provide the .npz file yourself")
    raise DatasetNotFoundError(_not_found_message(name, data_dir, tried, notes))


def _load_official(name: str, folder: Path, tried: list[str]) -> dict[str, Any] | None:
    """The arrays of `name` from the format its publishers ship it in, when `folder` has it:
    CIFAR-100's python pickles, EMNIST's gzip IDX files."""
    if name == "cifar100":
        from cosmosfl.data.official import find_cifar100, read_cifar100_python

        found = find_cifar100(folder)
        if found is not None:
            return read_cifar100_python(found)
        tried.append(f"{folder / 'cifar-100-python'} (the official python version)")
    elif name == "emnist_balanced":
        from cosmosfl.data.official import find_emnist, read_emnist_idx

        found = find_emnist(folder, "balanced")
        if found is not None:
            return read_emnist_idx(found, "balanced")
        tried.append(f"{folder}/emnist-balanced-*-idx*-ubyte.gz (the official gzip files)")
    return None


def _not_found_message(
    name: str, data_dir: str | Path | None, tried: list[str], notes: list[str]
) -> str:
    files = " or ".join(DATASET_FILES[name])
    lines = [f"dataset {name!r} not found."]
    if tried:
        lines.append("Looked for: " + ", ".join(tried) + ".")
    else:
        lines.append("No data directory was given (data_dir / COSMOSFL_DATA_DIR are unset).")
    lines += notes
    lines.append("Provide it in one of these ways:")
    lines.append(f"  - put {files} in a folder and pass --data-dir DIR (data_dir=DIR in Python)")
    lines.append("  - or set the environment variable COSMOSFL_DATA_DIR=DIR")
    if name in TORCHVISION_DATASETS:
        lines.append(
            "  - or set `download: true` (download=True) after `pip install cosmosfl[vision]`"
        )
    lines.append("  - or pass the path of an .npz file (x_train, y_train, x_test, y_test) as name")
    return "\n".join(lines)


def subsample(ds: Dataset, max_train: int | None, max_test: int | None, seed: int) -> ImageDataset:
    """Keep at most max_train / max_test samples, per class in proportion (None keeps all).

    Train and test draw from separate seeded streams, so changing one limit leaves the other
    split's subset unchanged. Original order is preserved.
    """
    x_train, y_train = _subsample_split(ds.x_train, ds.y_train, max_train, seed, 0, "max_train")
    x_test, y_test = _subsample_split(ds.x_test, ds.y_test, max_test, seed, 1, "max_test")
    if x_train is ds.x_train and x_test is ds.x_test:
        return ds
    return Dataset(
        ds.name, x_train, y_train, x_test, y_test, ds.classes, ds.natural, ds.feature_names
    )


def _subsample_split(
    x: np.ndarray, y: np.ndarray, limit: int | None, seed: int, stream: int, field: str
) -> tuple[np.ndarray, np.ndarray]:
    if limit is None:
        return x, y
    if isinstance(limit, bool) or not isinstance(limit, int | np.integer) or limit < 1:
        raise ValueError(f"{field} must be a positive integer or None, got {limit!r}")
    if limit >= len(y):
        return x, y
    idx = stratified_indices(y, int(limit), np.random.default_rng([int(seed), stream]))
    return x[idx], y[idx]
