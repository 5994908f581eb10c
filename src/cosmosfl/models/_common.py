"""Small helpers shared by the model zoo: width scaling and pool placement for small inputs."""

from __future__ import annotations

MIN_CHANNELS = 4


def scaled(channels: int, width: float) -> int:
    """Scale a channel count by the width multiplier, rounded, never below `MIN_CHANNELS`."""
    return max(MIN_CHANNELS, round(channels * width))


def can_pool(size: int, min_output: int) -> bool:
    """Whether a 2x2 stride-2 pool on a `size`-pixel map keeps at least `min_output` pixels."""
    return size // 2 >= min_output
