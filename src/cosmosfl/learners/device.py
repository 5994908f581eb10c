"""Where torch work runs: `resolve_device` names a device this machine has, or says why not.

A module of its own, with torch imported only when a device is resolved, so that engines and
the experiment layer can check a device name without importing the learners that train on it
(learners/torch.py re-exports these names for older imports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda", "mps")


class DeviceUnavailableError(ValueError):
    """A device was requested that this machine does not have (a user error, not a bug)."""


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """'auto' picks CUDA, then MPS, then CPU; an unavailable explicit choice is a clear error."""
    name = str(device)
    base = name.split(":")[0]
    if base not in DEVICES:
        raise ValueError(f"device {name!r} is not supported; allowed: {', '.join(DEVICES)}")
    import torch  # only now: a bad name above is refused without it

    if base == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if base == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(
            "device 'cuda' was requested but no CUDA device is available to torch "
            f"{torch.__version__} (a CPU-only build, no driver, or CUDA_VISIBLE_DEVICES hides "
            "the GPUs); use device=cpu"
        )
    if base == "mps" and not torch.backends.mps.is_available():
        raise DeviceUnavailableError(
            "device 'mps' was requested but MPS is not available; use device=cpu"
        )
    return torch.device(name)
