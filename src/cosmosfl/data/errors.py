"""Errors raised when a dataset cannot be found or is not in a usable shape."""

from __future__ import annotations


class DataError(ValueError):
    """The data cannot be used as given; the message (one line) says what and what to do.
    Every dataset error is one: catch this to catch them all."""


class DatasetNotFoundError(DataError, FileNotFoundError):
    """The dataset's files are nowhere the loader looked; the message lists where and how."""


class DatasetFormatError(DataError):
    """A dataset file was found but its arrays are not in the documented layout."""
