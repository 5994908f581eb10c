"""From stored samples to model inputs: images standardised per channel, feature vectors per
feature, both with statistics of the public set U (which every party holds, so no client's
private data shapes another's preprocessing). `standardiser(U)` is that rule, for the
partition mode and for sites alike."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["channel_stats", "feature_stats", "prepare_features", "prepare_images", "standardiser"]

_CHUNK = 8192  # images per chunk: bounds the float temporaries for 60k-image datasets


def standardiser(public: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """How stored samples become model inputs: standardised with statistics of the public set
    `public` (U), per feature for (N, D) vectors (a missing value becomes U's mean), per
    channel for (N, H, W, C) images."""
    if public.ndim == 4:
        c_mean, c_std = channel_stats(public)
        return lambda x: prepare_images(x, c_mean, c_std)
    f_mean, f_std = feature_stats(public)
    return lambda x: prepare_features(x, f_mean, f_std)


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


def feature_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and std of (N, D) feature vectors, ignoring missing values (NaN).

    Meant for the public set U, which every party holds: scaling with its statistics leaks no
    client's private data into another's preprocessing. A feature constant (or all missing)
    on U gets std 1, so standardising leaves it centred but unscaled.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"x must be a non-empty (N, D) feature array, got shape {x.shape}")
    present = ~np.isnan(x)
    count = present.sum(axis=0)
    filled = np.where(present, x, 0.0)
    mean = np.divide(filled.sum(axis=0), count, out=np.zeros(x.shape[1]), where=count > 0)
    var = np.divide(
        (np.where(present, x - mean, 0.0) ** 2).sum(axis=0),
        count,
        out=np.zeros(x.shape[1]),
        where=count > 0,
    )
    std = np.sqrt(var)
    std[std < 1e-8] = 1.0
    return mean.astype(np.float32), std.astype(np.float32)


def prepare_features(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """(N, D) feature vectors standardised per feature, (x - mean) / std, float32; a missing
    value (NaN) becomes 0, i.e. the mean it was standardised with (U's, in a run)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"x must be a (N, D) feature array, got shape {x.shape}")
    mean = np.asarray(mean, dtype=np.float32).reshape(-1)
    std = np.asarray(std, dtype=np.float32).reshape(-1)
    if mean.shape != (x.shape[1],) or std.shape != (x.shape[1],):
        raise ValueError(
            f"mean and std need one value per feature ({x.shape[1]}), got shapes "
            f"{mean.shape}, {std.shape}"
        )
    if not np.all(std > 0):
        raise ValueError("std must be > 0 for every feature")
    out = (x - mean) / std
    return np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32, copy=False)
