"""One feature layout for many tables: the public set U fixes it, every site's own file follows.

When each party reads its own table, the same column must become the same feature everywhere,
and a text column's values the same one-hot block, whatever values a site happens to hold. U is
the one table every party holds, so its columns decide: their order, which are numeric, and the
values of each text column (sorted, as `tabular.read_table` sorts them). A site's table must
hold the same feature columns (any order) plus its label column and optionally a `split` column;
a text value that U never shows is encoded as a missing value (all zeros), with a warning.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.data.cleaning import check_text_column, separator_hint
from cosmosfl.data.errors import DatasetFormatError
from cosmosfl.data.formats import check_test_fraction, stratified_test_mask
from cosmosfl.data.tabular import (
    MAX_CATEGORIES,
    MISSING_POLICIES,
    SPLIT_COLUMN,
    _codes,
    _read_frame,
    _rows,
    _sorted_values,
    _split_column,
)

__all__ = ["FeatureSchema", "read_public_table", "read_site_table"]


@dataclass(frozen=True)
class FeatureSchema:
    """The feature columns of U in order; text columns map to their values in U (as text)."""

    columns: tuple[str, ...]
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def feature_names(self) -> tuple[str, ...]:
        names: list[str] = []
        for col in self.columns:
            names += (
                [f"{col}={v}" for v in self.categories[col]] if col in self.categories else [col]
            )
        return tuple(names)


def read_public_table(
    path: str | Path,
    *,
    label_column: str | None = None,
    missing: str = "refuse",
    sep: str | None = None,
    encoding: str | None = None,
) -> tuple[np.ndarray, FeatureSchema]:
    """U from a CSV / TSV / Parquet table: (x float32 (N, D), the schema it fixes).

    Every column is a feature, except `label_column` and `split` when present (U is unlabelled:
    a copy of a labelled file may keep its label column, which is dropped, never read)."""
    _check_missing(missing)
    path = Path(path).expanduser()
    df = _read_frame(path, sep, encoding)
    df.columns = [str(c) for c in df.columns]
    where = str(path)
    if len(df) == 0:
        raise DatasetFormatError(f"{where}: the public set has a header but no rows")
    columns = [c for c in df.columns if c not in {label_column, SPLIT_COLUMN}]
    if not columns:
        raise DatasetFormatError(
            f"{where}: the public set has no feature columns{separator_hint(df)}"
        )
    categories: dict[str, tuple[str, ...]] = {}
    from pandas.api import types

    for col in columns:
        s = df[col]
        if types.is_bool_dtype(s.dtype) or not types.is_numeric_dtype(s.dtype):
            check_text_column(s, col, where)
            values = [str(v) for v in _sorted_values(s)]
            if len(values) > MAX_CATEGORIES:
                raise DatasetFormatError(
                    f"{where}: text column {col!r} has {len(values)} distinct values (at most "
                    f"{MAX_CATEGORIES} are one-hot encoded); drop it or encode it yourself"
                )
            categories[col] = tuple(values)
    schema = FeatureSchema(tuple(columns), categories)
    return encode(df, schema, where, missing), schema


def read_site_table(
    path: str | Path,
    schema: FeatureSchema,
    *,
    label_column: str | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    missing: str = "refuse",
    sep: str | None = None,
    encoding: str | None = None,
) -> dict[str, Any]:
    """A site's labelled table encoded with U's `schema`.

    Returns `x_train, y_train, x_test, y_test` and `classes`: the site's own label values as
    text, sorted, `classes[i]` naming y == i (the caller maps them onto the run's label set).
    `label_column` None: the last column that is neither a feature of U nor `split`. A site may
    hold a single class. Split: a `split` column (train/test), else a seeded stratified
    `test_fraction` of the rows."""
    _check_missing(missing)
    test_fraction = check_test_fraction(test_fraction)
    path = Path(path).expanduser()
    df = _read_frame(path, sep, encoding)
    df.columns = [str(c) for c in df.columns]
    where = str(path)
    if len(df) == 0:
        raise DatasetFormatError(f"{where}: the table has a header but no data rows")
    has_split = SPLIT_COLUMN in df.columns and label_column != SPLIT_COLUMN
    others = [c for c in df.columns if c not in schema.columns and c != SPLIT_COLUMN]
    if label_column is None:
        if len(others) != 1:
            raise DatasetFormatError(
                f"{where}: cannot tell the label column: columns outside the public set's "
                f"features are {others}; name it (label_column in the site file)"
            )
        label_column = others[0]
    if label_column not in df.columns:
        raise DatasetFormatError(
            f"{where}: label column {label_column!r} not found; the columns are "
            f"{list(df.columns)[:20]}"
        )
    absent = [c for c in schema.columns if c not in df.columns]
    extra = [c for c in others if c != label_column]
    if absent or extra:
        raise DatasetFormatError(
            f"{where}: the feature columns must be the public set's"
            + (f"; missing {absent}" if absent else "")
            + (f"; not in the public set {extra} (drop them)" if extra else "")
        )
    labels = df[label_column]
    if labels.isna().any():
        rows = np.flatnonzero(labels.isna().to_numpy())
        raise DatasetFormatError(
            f"{where}: {len(rows)} rows have no label in column {label_column!r} (data rows "
            f"{_rows(rows)}); label them or drop them"
        )
    values = _sorted_values(labels)
    y = _codes(labels, values)
    classes = tuple(_label_text(v) for v in values)
    x = encode(df, schema, where, missing)
    if has_split:
        is_test = _split_column(df[SPLIT_COLUMN], where)
    else:
        is_test = stratified_test_mask(y, test_fraction, seed, where, classes, "rows")
    return {
        "x_train": np.ascontiguousarray(x[~is_test]),
        "y_train": y[~is_test],
        "x_test": np.ascontiguousarray(x[is_test]),
        "y_test": y[is_test],
        "classes": classes,
    }


def encode(df: Any, schema: FeatureSchema, where: str, missing: str) -> np.ndarray:
    """The rows of `df` as float32 features laid out by `schema`; NaN marks a missing number
    (kept with `missing="impute"`, refused otherwise)."""
    from pandas.api import types

    blocks: list[np.ndarray] = []
    nan_counts: dict[str, int] = {}
    for col in schema.columns:
        s = df[col]
        if col in schema.categories:
            known = schema.categories[col]
            text = s.map(lambda v: None if v is None or v != v else str(v))
            unseen = sorted(set(text.dropna()) - set(known))
            if unseen:
                warnings.warn(
                    f"{where}: column {col!r} holds values the public set never shows "
                    f"({unseen[:5]}); they are encoded as missing",
                    UserWarning,
                    stacklevel=3,
                )
            codes = _codes(text.where(text.isin(known)), list(known))
            block = np.zeros((len(s), len(known)), dtype=np.float32)
            present = codes >= 0
            block[np.flatnonzero(present), codes[present]] = 1.0
            blocks.append(block)
            continue
        if types.is_bool_dtype(s.dtype) or not types.is_numeric_dtype(s.dtype):
            check_text_column(s, col, where)
            raise DatasetFormatError(
                f"{where}: column {col!r} holds text, and it is numeric in the public set"
            )
        values = s.to_numpy(dtype=np.float32, na_value=np.nan)
        if np.isinf(values).any():
            raise DatasetFormatError(f"{where}: column {col!r} holds infinite values")
        nans = int(np.isnan(values).sum())
        if nans:
            nan_counts[col] = nans
        blocks.append(values[:, None])
    if nan_counts and missing == "refuse":
        listed = ", ".join(f"{c!r} ({n})" for c, n in nan_counts.items())
        raise DatasetFormatError(
            f"{where}: missing values in numeric columns {listed}; set missing: impute (the "
            "public set's mean) or clean the file"
        )
    return np.ascontiguousarray(np.concatenate(blocks, axis=1))


def _label_text(value: Any) -> str:
    """A label as the run's label set spells it: integers without a decimal point."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _check_missing(missing: str) -> None:
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {', '.join(MISSING_POLICIES)}, got {missing!r}")
