"""The one table encoder: a `FeatureSchema` built from a frame, `encode(frame, schema)`, and the
labels, for a single dataset table and for the tables of a site federation alike.

A schema fixes the feature layout: which columns are features, in what order, which of them
are one-hot encoded and with which values. A single table builds it from itself; in a site
federation the public set U builds it and every site's table is encoded with U's, so the same
column becomes the same feature everywhere whatever values a site happens to hold. The rules,
each written once here:

- Numeric columns are features as they are (float32). Other columns (text, categorical,
  boolean) are one-hot encoded: their distinct values, in `label_order`, each give a 0/1
  feature named `<col>=<value>`; a missing value is all zeros in that block, and so is a value
  the schema's table never shows (with a warning). A text column with more than
  `MAX_CATEGORIES` distinct values is refused (probably an id or free text), as are dates,
  complex numbers, a text column that is nearly all numbers (`cleaning.check_text_column`) and
  a column without any value.
- Missing numbers stay NaN: refused with `missing="refuse"`, kept with `missing="impute"` for
  the caller to fill with the public set's means (`prepare.prepare_features`). Infinite values
  are refused.
- Labels: a row without one is refused; numbers must be integers; the distinct labels, in
  `label_order`, become ids 0..M-1 and `classes` their text (`value_text`).
- `label_order`: numbers numerically, then text lexicographically; the one order of labels,
  of one-hot values and of a federation's label set.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cosmosfl.data.cleaning import check_text_column
from cosmosfl.data.errors import DatasetFormatError

__all__ = [
    "MAX_CATEGORIES",
    "MISSING_POLICIES",
    "SPLIT_COLUMN",
    "FeatureSchema",
    "check_missing",
    "encode",
    "encode_labels",
    "label_order",
    "value_text",
]

MAX_CATEGORIES = 50  # more distinct values than this in a text column: an id or free text
MISSING_POLICIES = ("refuse", "impute")
SPLIT_COLUMN = "split"  # a column of train/test marks, never a feature


def check_missing(missing: str) -> None:
    """Refuse a missing-value policy other than `MISSING_POLICIES`."""
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {', '.join(MISSING_POLICIES)}, got {missing!r}")


def value_text(value: Any) -> str:
    """A label or category value as text: integers without a decimal point (`1.0` -> `"1"`)."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _order_key(text: str) -> tuple[int, float, str]:
    try:
        number = float(text)
    except ValueError:
        return (1, 0.0, text)
    return (0, number, "") if math.isfinite(number) else (1, 0.0, text)


def label_order(texts: Iterable[str]) -> list[str]:
    """Distinct `texts` sorted: numbers numerically first, then text lexicographically."""
    return sorted(set(texts), key=_order_key)


@dataclass(frozen=True)
class FeatureSchema:
    """The feature columns in order; text columns map to their values (as text, in order)."""

    columns: tuple[str, ...]
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_frame(cls, df: Any, columns: Iterable[str], where: str) -> FeatureSchema:
        """The layout `columns` of `df` fix: a text column's values become its one-hot block."""
        columns = tuple(columns)
        categories: dict[str, tuple[str, ...]] = {}
        for col in columns:
            s = df[col]
            if _is_text(s, col, where):
                values = label_order(_texts(s).dropna())
                if len(values) > MAX_CATEGORIES:
                    raise DatasetFormatError(
                        f"{where}: text column {col!r} has {len(values)} distinct values (at "
                        f"most {MAX_CATEGORIES} are one-hot encoded); it is probably an id or "
                        f"free text: drop it or encode it yourself{_numeric_hint(s)}"
                    )
                categories[col] = tuple(values)
            elif s.isna().all():
                raise DatasetFormatError(f"{where}: column {col!r} has no values at all; drop it")
        return cls(columns, categories)

    @property
    def feature_names(self) -> tuple[str, ...]:
        names: list[str] = []
        for col in self.columns:
            names += (
                [f"{col}={v}" for v in self.categories[col]] if col in self.categories else [col]
            )
        return tuple(names)


def encode(df: Any, schema: FeatureSchema, where: str, missing: str) -> np.ndarray:
    """The rows of `df` as C-contiguous float32 features laid out by `schema`; NaN marks a
    missing number (kept with `missing="impute"`, refused otherwise)."""
    import pandas as pd

    check_missing(missing)
    blocks: list[np.ndarray] = []
    nan_counts: dict[str, int] = {}
    for col in schema.columns:
        s = df[col]
        if col in schema.categories:
            known = schema.categories[col]
            text = _texts(s)
            unseen = label_order(set(text.dropna()) - set(known))
            if unseen:
                warnings.warn(
                    f"{where}: column {col!r} holds values the public set never shows "
                    f"({unseen[:5]}); they are encoded as missing",
                    UserWarning,
                    stacklevel=3,
                )
            codes = np.asarray(
                pd.Categorical(text.where(text.isin(known)), categories=list(known)).codes
            )
            block = np.zeros((len(s), len(known)), dtype=np.float32)
            present = codes >= 0  # missing (and unseen) values stay all zeros
            block[np.flatnonzero(present), codes[present]] = 1.0
            blocks.append(block)
            continue
        if _is_text(s, col, where):
            raise DatasetFormatError(
                f"{where}: column {col!r} holds text, and it is numeric in the public set"
            )
        values = s.to_numpy(dtype=np.float32, na_value=np.nan)
        if np.isinf(values).any():
            raise DatasetFormatError(
                f"{where}: column {col!r} holds {int(np.isinf(values).sum())} infinite values "
                "(or values too large for float32); clean the file"
            )
        nans = int(np.isnan(values).sum())
        if nans:
            nan_counts[col] = nans
        blocks.append(values[:, None])
    if nan_counts and missing == "refuse":
        listed = ", ".join(f"{c!r} ({n})" for c, n in nan_counts.items())
        raise DatasetFormatError(
            f"{where}: {sum(nan_counts.values())} missing values in numeric columns {listed}. "
            "Set `missing: impute` (data.missing in a run config, missing in a site file) to "
            "fill them from the public set's statistics, or clean the file (fill or drop those "
            "rows)"
        )
    return np.ascontiguousarray(np.concatenate(blocks, axis=1))


def encode_labels(
    series: Any, where: str, column: str, *, min_classes: int = 2
) -> tuple[np.ndarray, tuple[str, ...]]:
    """(int64 ids, classes): the distinct labels in `label_order` are ids 0..M-1, `classes[i]`
    naming id i. Refuses rows without a label, non-integer numbers, fewer than `min_classes`."""
    import pandas as pd
    from pandas.api import types

    absent = np.flatnonzero(series.isna().to_numpy())
    if len(absent):
        raise DatasetFormatError(
            f"{where}: {len(absent)} rows have no label in column {column!r} (data rows "
            f"{data_rows(absent)}; 1-based, header not counted); label them or drop them"
        )
    if types.is_float_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64)
        whole = np.isfinite(values) & (values == np.round(values))
        if not whole.all():
            raise DatasetFormatError(
                f"{where}: label column {column!r} holds non-integer numbers (e.g. "
                f"{values[~whole][:3].tolist()}); labels must be class names or integers"
            )
        series = series.astype(np.int64)
    text = _texts(series)
    classes = label_order(text)
    if len(classes) < min_classes:
        raise DatasetFormatError(
            f"{where}: label column {column!r} has {len(classes)} distinct value(s) "
            f"{classes}; classification needs at least {min_classes} classes"
        )
    codes = np.asarray(pd.Categorical(text, categories=classes).codes, dtype=np.int64)
    return codes, tuple(classes)


def data_rows(positions: np.ndarray) -> str:
    """Row positions as a user counts data rows (1-based, header not counted), the first 5."""
    shown = ", ".join(str(int(p) + 1) for p in positions[:5])
    return shown + (", ..." if len(positions) > 5 else "")


def _texts(series: Any) -> Any:
    """Each cell as `value_text`; missing cells stay missing."""
    return series.map(value_text, na_action="ignore")


def _is_text(series: Any, col: str, where: str) -> bool:
    """Whether a column is one-hot material; refuses dates, complex numbers and a text column
    that is nearly all numbers."""
    from pandas.api import types

    if types.is_datetime64_any_dtype(series.dtype) or types.is_timedelta64_dtype(series.dtype):
        raise DatasetFormatError(
            f"{where}: column {col!r} holds dates/times ({series.dtype}); convert it to "
            "numbers or drop it"
        )
    if types.is_complex_dtype(series.dtype):
        raise DatasetFormatError(f"{where}: column {col!r} holds complex numbers")
    if types.is_bool_dtype(series.dtype) or not types.is_numeric_dtype(series.dtype):
        check_text_column(series, col, where)
        return True
    return False


def _numeric_hint(series: Any) -> str:
    import pandas as pd

    numbers = pd.to_numeric(series, errors="coerce")
    if numbers.notna().mean() < 0.9:
        return ""
    odd = series[numbers.isna() & series.notna()].astype(str).unique()[:3].tolist()
    return f". If it should be numeric, these values are not numbers: {odd}"
