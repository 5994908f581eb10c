"""A labelled dataset with a fixed train/test split, of one of two kinds: images (N, H, W, C)
or feature vectors (N, D); validated on construction so a malformed source fails where it is
read, with a message that says what to fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cosmosfl.data.errors import DatasetFormatError

__all__ = ["Dataset", "ImageDataset", "from_arrays"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A labelled classification dataset with a fixed train/test split, of one of two kinds:
    images, uint8 (N, H, W, C), or feature vectors, float32 (N, D) (NaN marks a missing value,
    imputed with U's mean by `prepare_features`)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]
    natural: bool = False  # natural photos: horizontal flips are label-preserving
    feature_names: tuple[str, ...] | None = None  # feature vectors: one name per column

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def kind(self) -> str:
        """ "images" or "vectors"."""
        return "images" if self.x_train.ndim == 4 else "vectors"

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """One model input's shape: (C, H, W) for images (after `prepare_images`), (D,) for
        feature vectors."""
        if self.kind == "vectors":
            return (int(self.x_train.shape[1]),)
        return self.image_shape

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W), the layout models receive after `prepare_images` (images only)."""
        if self.kind != "images":
            raise ValueError(f"dataset {self.name!r} holds feature vectors, not images")
        _, h, w, c = self.x_train.shape
        return (c, h, w)

    @property
    def image_size(self) -> int:
        return int(self.image_shape[1])


# The name of the first release, when every dataset held images.
ImageDataset = Dataset


def _validate(ds: Dataset) -> None:
    where = f"dataset {ds.name!r}"
    if isinstance(ds.x_train, np.ndarray) and ds.x_train.ndim == 2:
        _validate_vectors(ds, where)
    else:
        _validate_images(ds, where)
    for split in ("train", "test"):
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        if not isinstance(y, np.ndarray) or y.dtype != np.int64 or y.ndim != 1:
            raise DatasetFormatError(
                f"{where}: y_{split} must be a 1-D int64 label array, got {_describe(y)}"
            )
        if len(x) != len(y):
            noun = "rows" if ds.x_train.ndim == 2 else "images"
            raise DatasetFormatError(
                f"{where}: x_{split} has {len(x)} {noun} but y_{split} has {len(y)} labels"
            )
        if len(y) == 0:
            raise DatasetFormatError(f"{where}: the {split} split is empty")
        if y.min() < 0 or y.max() >= len(ds.classes):
            raise DatasetFormatError(
                f"{where}: y_{split} has labels in [{y.min()}, {y.max()}], allowed are "
                f"0..{len(ds.classes) - 1} ({len(ds.classes)} classes)"
            )
    if ds.feature_names is not None and (
        ds.x_train.ndim != 2 or len(ds.feature_names) != ds.x_train.shape[1]
    ):
        raise DatasetFormatError(
            f"{where}: feature_names has {len(ds.feature_names)} names for inputs of shape "
            f"{ds.x_train.shape[1:]}; give one name per feature column"
        )


def _validate_vectors(ds: Dataset, where: str) -> None:
    for split in ("train", "test"):
        x = getattr(ds, f"x_{split}")
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 2:
            raise DatasetFormatError(
                f"{where}: x_{split} must be a float32 array of shape (N, D), got {_describe(x)}"
            )
        if np.isinf(x).any():
            raise DatasetFormatError(
                f"{where}: x_{split} holds infinite values; replace them (or mark them missing "
                "with NaN, imputed with U's mean)"
            )
    if ds.x_train.shape[1] != ds.x_test.shape[1]:
        raise DatasetFormatError(
            f"{where}: train rows have {ds.x_train.shape[1]} features but test rows have "
            f"{ds.x_test.shape[1]}; both splits must share the feature columns"
        )
    if ds.x_train.shape[1] == 0:
        raise DatasetFormatError(f"{where}: the feature vectors have no features")


def _validate_images(ds: Dataset, where: str) -> None:
    for split in ("train", "test"):
        x = getattr(ds, f"x_{split}")
        if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 4:
            raise DatasetFormatError(
                f"{where}: x_{split} must be uint8 images (N, H, W, C) or feature vectors "
                f"(N, D), got {_describe(x)}; scale images to 0..255 and convert with "
                ".astype(np.uint8)"
            )
        if x.shape[-1] not in (1, 3):
            hint = " (it looks channels-first; transpose to NHWC)" if x.shape[1] in (1, 3) else ""
            raise DatasetFormatError(
                f"{where}: x_{split} has {x.shape[-1]} channels in shape {x.shape}; "
                f"allowed: 1 (grayscale) or 3 (RGB) in the last axis{hint}"
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


def from_arrays(name: str, arrays: dict[str, Any], natural: bool | None) -> Dataset:
    """Normalise loaded arrays (NHW -> NHWC, (N, D) -> float32 vectors, integer labels ->
    int64) and validate them."""
    out: dict[str, np.ndarray] = {}
    vectors = np.asarray(arrays["x_train"]).ndim == 2
    for split in ("train", "test"):
        x, y = np.asarray(arrays[f"x_{split}"]), np.asarray(arrays[f"y_{split}"])
        if vectors and x.ndim == 2:
            if not (np.issubdtype(x.dtype, np.number) and x.dtype != np.bool_):
                raise DatasetFormatError(
                    f"{name}: x_{split} must hold numbers (feature vectors), got {_describe(x)}"
                )
            out[f"x_{split}"] = np.ascontiguousarray(x, dtype=np.float32)
        else:
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
    names = arrays.get("feature_names")
    features = tuple(str(f) for f in names) if names is not None else None
    return Dataset(name=name, classes=classes, natural=natural, feature_names=features, **out)
