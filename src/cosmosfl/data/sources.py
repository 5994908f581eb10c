"""Image datasets: where they come from, how they are validated, and how they become tensors.

`load_dataset` serves scikit-learn's digits (embedded, no download), user `.npz` files, named
datasets from a data directory, and, optionally, torchvision downloads. Every dataset is checked
on load, so a malformed file fails here with a clear message instead of deep inside training.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosmosfl.data._rounding import stratified_indices
from cosmosfl.data.download import TORCHVISION_DATASETS, fetch_torchvision, torchvision_available
from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.data.npz import read_npz

__all__ = [
    "DATASET_NAMES",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "ImageDataset",
    "channel_stats",
    "default_cache_dir",
    "load_dataset",
    "prepare_images",
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
_DIGITS_SPLIT_SEED = 0  # the digits train/test split is part of the dataset, not of a run


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """A labelled image classification dataset with a fixed train/test split (uint8 NHWC)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]
    natural: bool  # natural photos: horizontal flips are label-preserving

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W), the layout models receive after `prepare_images`."""
        _, h, w, c = self.x_train.shape
        return (c, h, w)

    @property
    def image_size(self) -> int:
        return int(self.x_train.shape[1])


def _validate(ds: ImageDataset) -> None:
    where = f"dataset {ds.name!r}"
    for split in ("train", "test"):
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 4:
            raise DatasetFormatError(
                f"{where}: x_{split} must be a uint8 array of shape (N, H, W, C), got "
                f"{_describe(x)}; scale images to 0..255 and convert with .astype(np.uint8)"
            )
        if x.shape[-1] not in (1, 3):
            hint = " (it looks channels-first; transpose to NHWC)" if x.shape[1] in (1, 3) else ""
            raise DatasetFormatError(
                f"{where}: x_{split} has {x.shape[-1]} channels in shape {x.shape}; "
                f"allowed: 1 (grayscale) or 3 (RGB) in the last axis{hint}"
            )
        if not isinstance(y, np.ndarray) or y.dtype != np.int64 or y.ndim != 1:
            raise DatasetFormatError(
                f"{where}: y_{split} must be a 1-D int64 label array, got {_describe(y)}"
            )
        if len(x) != len(y):
            raise DatasetFormatError(
                f"{where}: x_{split} has {len(x)} images but y_{split} has {len(y)} labels"
            )
        if len(y) == 0:
            raise DatasetFormatError(f"{where}: the {split} split is empty")
        if y.min() < 0 or y.max() >= len(ds.classes):
            raise DatasetFormatError(
                f"{where}: y_{split} has labels in [{y.min()}, {y.max()}], allowed are "
                f"0..{len(ds.classes) - 1} ({len(ds.classes)} classes)"
            )
    if ds.x_train.shape[1:] != ds.x_test.shape[1:]:
        raise DatasetFormatError(
            f"{where}: train images are {ds.x_train.shape[1:]} but test images are "
            f"{ds.x_test.shape[1:]} (H, W, C); both splits must share one image shape"
        )


def _describe(a: object) -> str:
    if isinstance(a, np.ndarray):
        return f"shape {a.shape} dtype {a.dtype}"
    return type(a).__name__


def _from_arrays(name: str, arrays: dict[str, np.ndarray], natural: bool | None) -> ImageDataset:
    """Normalise loaded arrays (NHW -> NHWC, integer labels -> int64) and validate them."""
    out: dict[str, np.ndarray] = {}
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        out[f"x_{split}"] = x[..., None] if x.ndim == 3 else x
        if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) and y.dtype != np.bool_):
            raise DatasetFormatError(
                f"{name}: y_{split} must be a 1-D integer label array, got {_describe(y)}"
            )
        out[f"y_{split}"] = y.astype(np.int64, copy=False)
    if "classes" in arrays:
        raw = np.asarray(arrays["classes"])
        if raw.ndim != 1:
            raise DatasetFormatError(f"{name}: classes must be 1-D, got shape {raw.shape}")
        classes = tuple(str(c) for c in raw)
    else:
        top = max(int(out["y_train"].max(initial=0)), int(out["y_test"].max(initial=0)))
        classes = tuple(str(i) for i in range(top + 1))
    if natural is None:
        natural = out["x_train"].ndim == 4 and out["x_train"].shape[-1] == 3
    return ImageDataset(name=name, classes=classes, natural=natural, **out)


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
) -> ImageDataset:
    """Load a dataset by name (see DATASET_NAMES) or from a path to an `.npz` file.

    Named datasets are looked up in `data_dir` (else `$COSMOSFL_DATA_DIR`); when absent and
    `download` is set, torchvision fetches them into `<cache_dir>/torchvision`.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    key = str(name).strip()
    canonical = key.lower().replace("-", "_")
    if canonical == "digits":
        return _load_digits()
    if canonical in DATASET_FILES:
        return _load_named(canonical, data_dir, download=download, cache=cache)
    path = Path(key).expanduser()
    if path.suffix == ".npz" or path.exists():
        if not path.is_file():
            what = "is not a file" if path.exists() else "does not exist"
            raise DatasetNotFoundError(f"dataset file {str(path)!r} {what}")
        return _from_arrays(path.stem, read_npz(path, cache), natural=None)
    raise ValueError(
        f"unknown dataset name {key!r}; allowed: {', '.join(DATASET_NAMES)}, "
        "or a path to an .npz file (x_train, y_train, x_test, y_test)"
    )


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
    if data_dir is None:
        data_dir = os.environ.get("COSMOSFL_DATA_DIR") or None
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
                return _from_arrays(name, read_npz(path, cache), natural=natural)
            tried.append(str(path))
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
                return _from_arrays(name, arrays, natural=natural)
            tried.append(f"{root} (torchvision files, not downloaded yet)")
        elif download:
            notes.append("download=True needs torchvision, which is not installed")
    elif download:
        notes.append(f"torchvision has no loader for {name}; provide the .npz file yourself")
    raise DatasetNotFoundError(_not_found_message(name, data_dir, tried, notes))


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


# -- preprocessing -----------------------------------------------------------------------------
_CHUNK = 8192  # images per chunk: bounds the float temporaries for 60k-image datasets


def channel_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and std of x/255 for uint8 NHWC images, accumulated in chunks.

    The std is floored at 1e-6 so that standardising a constant channel stays defined.
    """
    if x.ndim != 4 or len(x) == 0:
        raise ValueError(f"x must be a non-empty (N, H, W, C) image array, got shape {x.shape}")
    c = x.shape[-1]
    total = np.zeros(c, dtype=np.float64)
    total_sq = np.zeros(c, dtype=np.float64)
    for start in range(0, len(x), _CHUNK):
        part = x[start : start + _CHUNK].reshape(-1, c).astype(np.float64) / 255.0
        total += part.sum(axis=0)
        total_sq += np.square(part).sum(axis=0)
    n = x.shape[0] * x.shape[1] * x.shape[2]
    mean = total / n
    std = np.sqrt(np.maximum(total_sq / n - mean**2, 0.0))
    return mean.astype(np.float32), np.maximum(std, 1e-6).astype(np.float32)


def prepare_images(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """uint8 NHWC -> float32 NCHW standardised per channel: (x/255 - mean) / std."""
    if x.ndim != 4:
        raise ValueError(f"x must be a (N, H, W, C) image array, got shape {x.shape}")
    c = x.shape[-1]
    mean = np.asarray(mean, dtype=np.float32).reshape(-1)
    std = np.asarray(std, dtype=np.float32).reshape(-1)
    if mean.shape != (c,) or std.shape != (c,):
        raise ValueError(
            f"mean and std need one value per channel ({c}), got shapes {mean.shape}, {std.shape}"
        )
    if not np.all(std > 0):
        raise ValueError(f"std must be > 0 in every channel, got {std.tolist()}")
    out = np.empty((x.shape[0], c, x.shape[1], x.shape[2]), dtype=np.float32)
    for start in range(0, len(x), _CHUNK):
        part = x[start : start + _CHUNK].astype(np.float32) / 255.0
        out[start : start + _CHUNK] = ((part - mean) / std).transpose(0, 3, 1, 2)
    return out


def subsample(
    ds: ImageDataset, max_train: int | None, max_test: int | None, seed: int
) -> ImageDataset:
    """Keep at most max_train / max_test samples, per class in proportion (None keeps all).

    Train and test draw from separate seeded streams, so changing one limit leaves the other
    split's subset unchanged. Original order is preserved.
    """
    x_train, y_train = _subsample_split(ds.x_train, ds.y_train, max_train, seed, 0, "max_train")
    x_test, y_test = _subsample_split(ds.x_test, ds.y_test, max_test, seed, 1, "max_test")
    if x_train is ds.x_train and x_test is ds.x_test:
        return ds
    return ImageDataset(ds.name, x_train, y_train, x_test, y_test, ds.classes, ds.natural)


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
