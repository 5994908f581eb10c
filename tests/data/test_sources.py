"""Datasets: digits, plain .npz files, named look-up, validation, preprocessing, real data."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import cosmosfl.data.prepare as prepare
import cosmosfl.data.sources as sources
from cosmosfl.data import (
    DATASET_NAMES,
    DatasetFormatError,
    DatasetNotFoundError,
    ImageDataset,
    channel_stats,
    load_dataset,
    prepare_images,
    subsample,
)

DATA_DIR = Path(
    os.environ.get("COSMOSFL_DATA_DIR")
    or Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
)
needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(),
    reason=f"real image data not found at {DATA_DIR} (set COSMOSFL_DATA_DIR to run these)",
)


# -- helpers -----------------------------------------------------------------------------------
def _plain(path: Path, n_train=12, n_test=6, shape=(5, 5, 3), n_classes=3, **override) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (n_train, *shape), dtype=np.uint8),
        "y_train": np.arange(n_train, dtype=np.int64) % n_classes,
        "x_test": rng.integers(0, 256, (n_test, *shape), dtype=np.uint8),
        "y_test": np.arange(n_test, dtype=np.int64) % n_classes,
        "classes": np.array([f"c{i}" for i in range(n_classes)]),
    }
    arrays.update(override)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


# -- digits ------------------------------------------------------------------------------------
def test_digits_shapes_ranges_and_fixed_stratified_split() -> None:
    from sklearn.datasets import load_digits

    ds = load_dataset("digits")
    total = load_digits().target
    assert ds.x_train.dtype == np.uint8 and ds.y_train.dtype == np.int64
    assert ds.x_train.shape[1:] == (8, 8, 1) and ds.x_test.shape[1:] == (8, 8, 1)
    assert len(ds.x_train) + len(ds.x_test) == len(total) == 1797
    assert ds.x_train.min() == 0 and ds.x_train.max() == 255  # 0..16 rescaled to the full range
    assert ds.image_shape == (1, 8, 8) and ds.image_size == 8 and ds.num_classes == 10
    assert not ds.natural
    # 25 % test, stratified: every class contributes a quarter of its images, up to rounding.
    test_counts, all_counts = np.bincount(ds.y_test), np.bincount(total)
    assert np.all(np.abs(test_counts - 0.25 * all_counts) <= 1)
    np.random.seed(123)  # the split must not follow any global or run seed
    again = load_dataset("digits")
    assert np.array_equal(ds.x_train, again.x_train) and np.array_equal(ds.y_test, again.y_test)


# -- plain npz ---------------------------------------------------------------------------------
def test_plain_npz_round_trip(tmp_path: Path) -> None:
    path = _plain(tmp_path / "mine.npz")
    ds = load_dataset(path, cache_dir=tmp_path / "cache")
    with np.load(path) as raw:
        for key in ("x_train", "y_train", "x_test", "y_test"):
            assert np.array_equal(getattr(ds, key), raw[key])
    assert ds.name == "mine" and ds.classes == ("c0", "c1", "c2")
    assert ds.natural  # three channels
    assert ds.image_shape == (3, 5, 5)


def test_plain_npz_grayscale_nhw_and_int32_labels_and_no_classes(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "gray.npz"
    np.savez(
        path,
        x_train=rng.integers(0, 256, (7, 4, 4), dtype=np.uint8),
        y_train=np.array([0, 1, 2, 3, 0, 1, 2], dtype=np.int32),
        x_test=rng.integers(0, 256, (3, 4, 4), dtype=np.uint8),
        y_test=np.array([4, 0, 1], dtype=np.int32),
    )
    ds = load_dataset(str(path), cache_dir=tmp_path)
    assert ds.x_train.shape == (7, 4, 4, 1) and ds.y_train.dtype == np.int64
    assert ds.classes == ("0", "1", "2", "3", "4") and not ds.natural


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"x_test": None}, "x_test"),
        ({"y_train": np.zeros(11, dtype=np.int64)}, "12 images but y_train has 11"),
        ({"y_test": np.array([0, 1, 2, 5, 0, 1])}, "allowed are 0..2"),
        ({"y_train": -np.ones(12, dtype=np.int64)}, "y_train has labels in [-1, -1]"),
        ({"x_train": np.zeros((12, 5, 5, 3), dtype=np.float32)}, "uint8"),
        ({"y_train": np.zeros(12, dtype=np.float64)}, "integer label"),
        ({"x_train": np.zeros((12, 3, 5, 5), dtype=np.uint8)}, "channels-first"),
        ({"x_test": np.zeros((6, 4, 4, 3), dtype=np.uint8)}, "share one image shape"),
        (
            {"x_test": np.zeros((0, 5, 5, 3), dtype=np.uint8), "y_test": np.zeros(0, np.int64)},
            "empty",
        ),
    ],
)
def test_bad_npz_raises_format_error(tmp_path: Path, override: dict, expected: str) -> None:
    path = _plain(tmp_path / "bad.npz", **override)
    with pytest.raises(DatasetFormatError, match="bad") as info:
        load_dataset(path, cache_dir=tmp_path)
    assert expected in str(info.value)


def test_unreadable_files_raise_format_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"this is not a zip file")
    with pytest.raises(DatasetFormatError, match="not a readable"):
        load_dataset(junk, cache_dir=tmp_path)
    pickled = tmp_path / "pickled.npz"
    _plain(pickled, classes=np.array([object(), object(), object()], dtype=object))
    with pytest.raises(DatasetFormatError, match="without pickle"):
        load_dataset(pickled, cache_dir=tmp_path)


def test_image_dataset_validates_direct_construction() -> None:
    x = np.zeros((4, 2, 2, 1), dtype=np.uint8)
    with pytest.raises(DatasetFormatError, match="int64"):
        ImageDataset("d", x, np.zeros(4, np.int32), x, np.zeros(4, np.int64), ("a",), False)


# -- named datasets ----------------------------------------------------------------------------
def test_missing_named_dataset_lists_paths_tried(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sources, "torchvision_available", lambda: False)
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("cifar10", tmp_path, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert str(tmp_path / "cifar10.npz") in message
    assert str(tmp_path / "cifar10_jpeg.npz") in message
    assert "--data-dir" in message and "COSMOSFL_DATA_DIR" in message
    assert "cosmosfl[vision]" in message


def test_missing_dataset_without_any_data_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("COSMOSFL_DATA_DIR", raising=False)
    monkeypatch.setattr(sources, "torchvision_available", lambda: False)
    with pytest.raises(DatasetNotFoundError, match="No data directory") as info:
        load_dataset("mnist", cache_dir=tmp_path, download=True)
    assert "needs torchvision" in str(info.value)
    with pytest.raises(DatasetNotFoundError, match="no loader for tiny_imagenet"):
        load_dataset("tiny_imagenet", tmp_path, cache_dir=tmp_path, download=True)
    with pytest.raises(DatasetNotFoundError, match="does not exist"):
        load_dataset(tmp_path / "absent.npz", cache_dir=tmp_path)


def test_named_dataset_from_environment_and_natural_flag(tmp_path: Path, monkeypatch) -> None:
    _plain(tmp_path / "fashion_mnist.npz", shape=(6, 6, 1))
    _plain(tmp_path / "cifar10.npz")
    _plain(tmp_path / "emnist_balanced_partial.npz", shape=(6, 6, 1))
    monkeypatch.setenv("COSMOSFL_DATA_DIR", str(tmp_path))
    fashion = load_dataset("fashion-mnist", cache_dir=tmp_path)
    assert fashion.name == "fashion_mnist" and not fashion.natural
    assert load_dataset("cifar10", cache_dir=tmp_path).natural
    with pytest.warns(UserWarning, match="incomplete copy"):
        partial = load_dataset("EMNIST_balanced", cache_dir=tmp_path)
    assert partial.x_train.shape[1:] == (6, 6, 1)


def test_unknown_name_lists_allowed_names() -> None:
    with pytest.raises(ValueError, match="unknown dataset name 'cifar11'") as info:
        load_dataset("cifar11")
    assert all(name in str(info.value) for name in DATASET_NAMES)
    assert ".npz" in str(info.value)


# -- preprocessing -----------------------------------------------------------------------------
def test_channel_stats_match_direct_computation_in_chunks(monkeypatch) -> None:
    monkeypatch.setattr(prepare, "_CHUNK", 7)
    x = np.random.default_rng(3).integers(0, 256, (50, 4, 5, 3), dtype=np.uint8)
    mean, std = channel_stats(x)
    scaled = x.astype(np.float64) / 255
    np.testing.assert_allclose(mean, scaled.mean(axis=(0, 1, 2)), rtol=1e-6)
    np.testing.assert_allclose(std, scaled.std(axis=(0, 1, 2)), rtol=1e-5)
    assert mean.shape == (3,) and mean.dtype == np.float32


def test_prepare_images_standardises_to_nchw(monkeypatch) -> None:
    monkeypatch.setattr(prepare, "_CHUNK", 3)
    x = np.random.default_rng(4).integers(0, 256, (10, 4, 5, 2), dtype=np.uint8)
    mean, std = np.array([0.5, 0.25]), np.array([0.2, 0.1])
    out = prepare_images(x, mean, std)
    assert out.shape == (10, 2, 4, 5) and out.dtype == np.float32
    expected = (x.astype(np.float64) / 255 - mean) / std
    np.testing.assert_allclose(out, expected.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="one value per channel"):
        prepare_images(x, np.zeros(3), np.ones(3))


def _indexed_dataset(n_train: int = 300, n_test: int = 100) -> ImageDataset:
    """Images that carry their own index, so subsets can be traced back."""

    def images(n: int) -> np.ndarray:
        x = np.zeros((n, 2, 2, 1), dtype=np.uint8)
        x[:, 0, 0, 0], x[:, 0, 1, 0] = np.arange(n) % 256, np.arange(n) // 256
        return x

    def labels(n: int) -> np.ndarray:  # imbalanced: class c has weight c + 1
        return np.repeat(np.arange(3), [n // 6, n // 3, n - n // 6 - n // 3]).astype(np.int64)

    return ImageDataset(
        "idx",
        images(n_train),
        labels(n_train),
        images(n_test),
        labels(n_test),
        ("a", "b", "c"),
        False,
    )


def _ids(x: np.ndarray) -> np.ndarray:
    return x[:, 0, 0, 0].astype(int) + 256 * x[:, 0, 1, 0].astype(int)


def test_subsample_is_stratified_seeded_and_order_preserving() -> None:
    ds = _indexed_dataset()
    small = subsample(ds, 60, 20, seed=5)
    assert len(small.y_train) == 60 and len(small.y_test) == 20
    full_share = np.bincount(ds.y_train) / len(ds.y_train)
    assert np.all(np.abs(np.bincount(small.y_train) - 60 * full_share) < 1)
    ids = _ids(small.x_train)
    assert np.all(np.diff(ids) > 0)  # a subset, in the original order
    assert np.array_equal(ds.y_train[ids], small.y_train)
    same = subsample(ds, 60, 20, seed=5)
    assert np.array_equal(_ids(same.x_train), ids)
    assert not np.array_equal(_ids(subsample(ds, 60, 20, seed=6).x_train), ids)
    # The test limit does not disturb the train subset.
    assert np.array_equal(_ids(subsample(ds, 60, 50, seed=5).x_train), ids)
    assert subsample(ds, None, None, seed=0) is ds
    with pytest.raises(ValueError, match="max_train must be a positive integer"):
        subsample(ds, 0, None, seed=0)


# -- the real data -----------------------------------------------------------------------------
@pytest.mark.data
@needs_data
@pytest.mark.parametrize(
    ("name", "n_train", "n_test", "shape", "classes"),
    [
        ("mnist", 60000, 10000, (28, 28, 1), 10),
        ("fashion_mnist", 60000, 10000, (28, 28, 1), 10),
        ("emnist_balanced", 9120, 304, (28, 28, 1), 47),
    ],
)
def test_real_grayscale_datasets(name, n_train, n_test, shape, classes, tmp_path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the partial EMNIST file warns that it is partial
        ds = load_dataset(name, DATA_DIR, cache_dir=tmp_path)
    assert ds.x_train.shape == (n_train, *shape) and ds.x_test.shape == (n_test, *shape)
    assert ds.num_classes == classes and not ds.natural
    assert set(np.unique(ds.y_train)) == set(range(classes))


@pytest.mark.data
@needs_data
def test_real_cifar10_jpeg_subset_decodes(tmp_path: Path) -> None:
    """The real CIFAR-10 JPEG bytes, cut down to a few images so it runs in well under a second."""
    arrays = {}
    with np.load(DATA_DIR / "cifar10_jpeg.npz") as raw:
        for split, n in (("train", 40), ("test", 10)):
            off = raw[f"{split}_offsets"][: n + 1]
            arrays[f"{split}_jpeg"] = raw[f"{split}_jpeg"][: off[-1]]
            arrays[f"{split}_offsets"] = off
            arrays[f"y_{split}"] = raw[f"y_{split}"][:n]
        arrays["classes"] = raw["classes"]
    np.savez(tmp_path / "cifar10_jpeg.npz", **arrays)
    ds = load_dataset("cifar10", tmp_path, cache_dir=tmp_path / "cache")
    assert ds.x_train.shape == (40, 32, 32, 3) and ds.x_test.shape == (10, 32, 32, 3)
    assert ds.natural and ds.classes[0] == "airplane" and ds.num_classes == 10
    assert ds.x_train.std() > 20  # real photos, not blank decodes


@pytest.mark.data
@pytest.mark.slow
@needs_data
def test_real_cifar10_full(tmp_path: Path) -> None:
    ds = load_dataset("cifar10", DATA_DIR, cache_dir=tmp_path)
    assert ds.x_train.shape == (50000, 32, 32, 3) and ds.x_test.shape == (10000, 32, 32, 3)
    assert np.array_equal(np.bincount(ds.y_train), np.full(10, 5000))
    assert np.array_equal(np.bincount(ds.y_test), np.full(10, 1000))
    cached = load_dataset("cifar10", DATA_DIR, cache_dir=tmp_path)
    assert np.array_equal(cached.x_test, ds.x_test)
