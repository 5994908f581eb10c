"""The error a user's configuration mistake raises: a leaf module, so that every module that
checks a setting can raise it without importing the config schema."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A user-facing configuration mistake (no traceback needed)."""
