"""Errors raised when a dataset cannot be found or is not in a usable shape."""

from __future__ import annotations


class DatasetNotFoundError(FileNotFoundError):
    """The dataset's files are nowhere the loader looked; the message lists where and how."""


class DatasetFormatError(ValueError):
    """A dataset file was found but its arrays are not in the documented layout."""
