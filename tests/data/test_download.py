"""The optional torchvision fallback, exercised with a stand-in module (torchvision is optional)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import cosmosfl.data.sources as sources
from cosmosfl.data import DatasetNotFoundError, load_dataset


class _FakeEMNIST:
    classes = ("0", "1", "2")

    def __init__(self, root: str, train: bool, download: bool, split: str) -> None:
        assert split == "balanced"
        if not (Path(root) / "fetched").exists():
            if not download:
                raise RuntimeError("Dataset not found. You can use download=True to download it")
            (Path(root) / "fetched").touch()
        n = 6 if train else 3
        self.data = torch.zeros(n, 4, 4, dtype=torch.uint8)
        self.data[:, 0, 3] = 255  # raw EMNIST is stored transposed: this is the upright (3, 0)
        self.targets = torch.arange(n) % 3


def test_torchvision_fallback_downloads_once_and_serves_upright_images(
    tmp_path: Path, monkeypatch
) -> None:
    fake = types.ModuleType("torchvision")
    fake.datasets = types.SimpleNamespace(EMNIST=_FakeEMNIST)
    monkeypatch.setitem(sys.modules, "torchvision", fake)
    monkeypatch.setitem(sys.modules, "torchvision.datasets", fake.datasets)
    monkeypatch.setattr(sources, "torchvision_available", lambda: True)
    cache = tmp_path / "cache"
    with pytest.raises(DatasetNotFoundError, match="not downloaded yet"):
        load_dataset("emnist_balanced", tmp_path, cache_dir=cache)
    ds = load_dataset("emnist_balanced", tmp_path, cache_dir=cache, download=True)
    assert ds.x_train.shape == (6, 4, 4, 1) and ds.y_test.tolist() == [0, 1, 2]
    assert (ds.x_train[:, 3, 0, 0] == 255).all() and (ds.x_train[:, 0, 3, 0] == 0).all()
    assert (cache / "torchvision" / "fetched").exists()
    again = load_dataset("emnist_balanced", tmp_path, cache_dir=cache)  # no download needed now
    assert np.array_equal(again.x_train, ds.x_train)


def test_torchvision_download_failure_is_reported(tmp_path: Path, monkeypatch) -> None:
    def offline(name, root, *, download):
        raise OSError("network unreachable")

    monkeypatch.setattr(sources, "torchvision_available", lambda: True)
    monkeypatch.setattr(sources, "fetch_torchvision", offline)
    with pytest.raises(DatasetNotFoundError, match="network unreachable") as info:
        load_dataset("cifar100", tmp_path, cache_dir=tmp_path, download=True)
    assert str(tmp_path / "cifar100.npz") in str(info.value)
