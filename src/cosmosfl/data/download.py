"""Optional downloads through torchvision (`pip install cosmosfl[vision]`).

torchvision is never required: it is the fallback when a named dataset is not in the data
directory. Its raw files are kept under `<cache_dir>/torchvision`, so a dataset is downloaded once.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

# name -> (torchvision.datasets class, extra constructor arguments, images stored transposed)
TORCHVISION_DATASETS: dict[str, tuple[str, dict[str, str], bool]] = {
    "cifar10": ("CIFAR10", {}, False),
    "cifar100": ("CIFAR100", {}, False),
    "mnist": ("MNIST", {}, False),
    "fashion_mnist": ("FashionMNIST", {}, False),
    # torchvision's raw EMNIST images are transposed; we serve them upright.
    "emnist_balanced": ("EMNIST", {"split": "balanced"}, True),
}


def torchvision_available() -> bool:
    """Whether torchvision can be imported (checked without importing it)."""
    return importlib.util.find_spec("torchvision") is not None


def fetch_torchvision(name: str, root: Path, *, download: bool) -> dict[str, np.ndarray] | None:
    """Load `name` with torchvision.datasets under `root`; None when it is not there yet.

    With download=False only files fetched earlier are used, so this never touches the network.
    """
    import torchvision.datasets as tvd

    cls_name, extra, transposed = TORCHVISION_DATASETS[name]
    cls = getattr(tvd, cls_name)
    root.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    for split, train in (("train", True), ("test", False)):
        try:
            ds = cls(root=str(root), train=train, download=download, **extra)
        except RuntimeError:  # torchvision's "Dataset not found. You can use download=True"
            if download:
                raise
            return None
        x = np.asarray(ds.data.numpy() if hasattr(ds.data, "numpy") else ds.data, dtype=np.uint8)
        if transposed:
            x = x.transpose(0, 2, 1)
        if x.ndim == 3:
            x = x[..., None]
        targets = ds.targets.numpy() if hasattr(ds.targets, "numpy") else ds.targets
        arrays[f"x_{split}"] = np.ascontiguousarray(x)
        arrays[f"y_{split}"] = np.asarray(targets, dtype=np.int64)
        arrays["classes"] = np.asarray([str(c) for c in ds.classes])
    return arrays
