"""`resolve_device` lives in learners/device.py, which needs no torch to import (engines and the
experiment layer import it from there); learners/torch.py re-exports it for older imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cosmosfl.learners import device
from cosmosfl.learners import torch as torch_learners

DEVICE_PY = Path(device.__file__)


def test_the_module_imports_without_torch() -> None:
    # Loaded from its file alone: the package's __init__ imports the torch learners.
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('device', {str(DEVICE_PY)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert 'torch' not in sys.modules, 'imported torch'\n"
        "try:\n"
        "    module.resolve_device('tpu')\n"
        "except ValueError as err:\n"
        "    assert 'allowed: auto, cpu, cuda, mps' in str(err)\n"
        "assert 'torch' not in sys.modules, 'a bad name needs no torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_learners_torch_re_exports_the_same_names() -> None:
    assert torch_learners.resolve_device is device.resolve_device
    assert torch_learners.DeviceUnavailableError is device.DeviceUnavailableError
    assert torch_learners.DEVICES == device.DEVICES


def test_resolve_device_names_a_device_torch_has() -> None:
    assert str(device.resolve_device("cpu")) == "cpu"
    with pytest.raises(ValueError, match="not supported"):
        device.resolve_device("tpu")
