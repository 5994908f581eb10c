"""Reading tabular datasets (CSV, TSV, Parquet) into float32 feature arrays and int64 labels.

`read_table` returns a dict with `x_train, y_train, x_test, y_test`, `classes` (tuple of str,
`classes[i]` names label i) and `feature_names` (tuple of str, one per column of x).

Rules, so that every file becomes the same arrays on every machine:

- Labels: the label column (default: the last column other than `split`) holds strings,
  integers or booleans; its distinct values, sorted (numbers numerically, text
  lexicographically), become labels 0..M-1 and `classes` are their string forms. A row without a
  label is refused, as is a label column with fewer than 2 distinct values.
- Numeric columns become float32 features. Other columns (text, categorical, boolean) are
  one-hot encoded: their distinct values, sorted, each give a 0/1 feature named `<col>=<value>`;
  a missing value is all zeros in that block. A text column with more than 50 distinct values is
  refused (probably an id or free text: drop it or encode it yourself).
- Missing numeric values: refused by default (`missing="refuse"`); `missing="impute"` keeps them
  as NaN for the caller to impute with statistics of the public set. Infinite values are refused.
- Split: a column named `split` holding `train`/`test` (any case) in every row gives the split
  and is not a feature; without one, a seeded stratified `test_fraction` of the rows is the test
  split. Both keep the file's row order within each split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.data.cleaning import (
    MISSING_MARKERS,
    check_text_column,
    clean_frame,
    decode_error,
    separator_hint,
    sniff_separator,
)
from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.data.formats import check_test_fraction, stratified_test_mask

__all__ = [
    "MAX_CATEGORIES",
    "MISSING_POLICIES",
    "TABLE_SUFFIXES",
    "MissingDependencyError",
    "read_table",
]

MAX_CATEGORIES = 50  # more distinct values than this in a text column: an id or free text
MISSING_POLICIES = ("refuse", "impute")
SPLIT_COLUMN = "split"
_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zip")
_TSV_SUFFIXES = (".tsv", ".tsv.gz", ".tab")
_PARQUET_SUFFIXES = (".parquet", ".pq")
TABLE_SUFFIXES = (*_CSV_SUFFIXES, *_TSV_SUFFIXES, *_PARQUET_SUFFIXES)
PARQUET_HINT = "reading Parquet needs pyarrow: pip install 'cosmosfl[parquet]'"


class MissingDependencyError(DatasetFormatError, ImportError):
    """An optional package needed to read this file is not installed (catchable as either)."""


def read_table(
    path: str | Path,
    *,
    label_column: str | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    missing: str = "refuse",
    sep: str | None = None,
    encoding: str | None = None,
) -> dict[str, Any]:
    """Read a CSV/TSV (optionally compressed) or Parquet table into train/test feature arrays.

    x arrays are C-contiguous float32 (N, D); y int64 labels. `label_column` names the label
    column (None: the last column other than `split`); its sorted distinct values become labels
    0..M-1. Numeric columns are features as they are; text, categorical and boolean columns are
    one-hot encoded (sorted values, features `<col>=<value>`, a missing value is all zeros; more
    than 50 distinct values is refused). Missing numeric values are refused unless
    `missing="impute"`, which keeps them as NaN: impute them with statistics of the public set.
    A `split` column (train/test, any case) gives the split; else a seeded stratified
    `test_fraction` of the rows is the test split. `sep` / `encoding`: the CSV separator
    (default: `,`, or sniffed) and text encoding (default UTF-8). Cells are cleaned first
    (`data/cleaning.py`: spaces, missing-value markers, decimal commas). See the module
    docstring for details.
    """
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {', '.join(MISSING_POLICIES)}, got {missing!r}")
    test_fraction = check_test_fraction(test_fraction)
    path = Path(path).expanduser()
    df = _read_frame(path, sep, encoding)
    where = str(path)
    columns = [str(c) for c in df.columns]
    df.columns = columns
    if not columns:
        raise DatasetFormatError(f"{where}: the table has no columns")
    has_split = SPLIT_COLUMN in columns and label_column != SPLIT_COLUMN
    if label_column is None:
        candidates = [c for c in columns if not (has_split and c == SPLIT_COLUMN)]
        if not candidates:
            raise DatasetFormatError(f"{where}: the only column is {SPLIT_COLUMN!r}; no labels")
        label_column = candidates[-1]
    elif label_column not in columns:
        raise DatasetFormatError(
            f"{where}: label column {label_column!r} not found; the columns are "
            f"{_listing(columns)}. Set label_column to one of them (default: the last)"
        )
    features = [c for c in columns if c != label_column and not (has_split and c == SPLIT_COLUMN)]
    if not features:
        raise DatasetFormatError(
            f"{where}: no feature columns besides the label column {label_column!r}"
            f"{separator_hint(df)}"
        )
    if len(df) == 0:
        raise DatasetFormatError(f"{where}: the table has a header but no data rows")
    y, classes = _labels(df[label_column], where, label_column)
    x, names = _features(df, features, where, missing)
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
        "feature_names": names,
    }


def _read_frame(path: Path, sep: str | None = None, encoding: str | None = None) -> Any:
    """The table as a DataFrame, cleaned by `cleaning.clean_frame` (the one place the cell
    rules live, for datasets, U and site files alike)."""
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise DatasetNotFoundError(f"table file {str(path)!r} {what}")
    name = path.name.lower()
    if not name.endswith(_CSV_SUFFIXES + _TSV_SUFFIXES + _PARQUET_SUFFIXES):
        raise DatasetFormatError(
            f"{path}: unknown table format; supported endings: "
            f"{', '.join(_CSV_SUFFIXES + _TSV_SUFFIXES + _PARQUET_SUFFIXES)}"
        )
    try:
        import pandas as pd  # imported here: it takes about a second
    except ImportError as exc:
        raise MissingDependencyError("reading tables needs pandas: pip install pandas") from exc
    errors: tuple[type[BaseException], ...] = (ValueError, OSError, EOFError, pd.errors.ParserError)
    if name.endswith(_PARQUET_SUFFIXES):
        try:
            import pyarrow
        except ImportError as exc:
            raise MissingDependencyError(PARQUET_HINT) from exc
        errors += (pyarrow.ArrowException,)
    raw_header: list[Any] | None = None
    try:
        if name.endswith(_PARQUET_SUFFIXES):
            df = pd.read_parquet(path, engine="pyarrow")
        else:
            given = sep
            if sep is None:
                sep = "\t" if name.endswith(_TSV_SUFFIXES) else ","
            df, raw_header = _read_text_table(pd, path, sep, encoding)
            if given is None and len(df.columns) == 1:
                sniffed = sniff_separator(str(df.columns[0]))
                if sniffed is not None:
                    sep = sniffed
                    df, raw_header = _read_text_table(pd, path, sep, encoding)
            df.attrs["sep"] = sep
    except pd.errors.EmptyDataError as exc:
        raise DatasetFormatError(
            f"{path}: the file is empty; expected a header row and one row per sample"
        ) from exc
    except UnicodeDecodeError as exc:
        raise decode_error(path, exc, encoding) from None
    except LookupError as exc:  # an encoding Python does not know
        raise DatasetFormatError(f"{path}: data.encoding: {_short(exc)}") from None
    except errors as exc:
        raise DatasetFormatError(f"{path}: not a readable table ({_short(exc)})") from exc
    return clean_frame(df, str(path), raw_header)


def _read_text_table(pd: Any, path: Path, sep: str, encoding: str | None) -> tuple[Any, list]:
    """The frame and its header row as written (pandas renames duplicate names)."""
    df = pd.read_csv(
        path, sep=sep, encoding=encoding, na_values=sorted(MISSING_MARKERS), keep_default_na=True
    )
    header = pd.read_csv(path, sep=sep, encoding=encoding, header=None, nrows=1, dtype=str)
    if header.empty or len(header.columns) != len(df.columns):
        return df, list(df.columns)
    # an empty header cell keeps pandas' name for it ("Unnamed: 3")
    return df, [
        v if isinstance(v, str) else str(c)
        for v, c in zip(header.iloc[0].tolist(), df.columns, strict=True)
    ]


def _labels(series: Any, where: str, column: str) -> tuple[np.ndarray, tuple[str, ...]]:
    from pandas.api import types

    absent = np.flatnonzero(series.isna().to_numpy())
    if len(absent):
        raise DatasetFormatError(
            f"{where}: {len(absent)} rows have no label in column {column!r} (data rows "
            f"{_rows(absent)}; 1-based, header not counted); label them or drop them"
        )
    if types.is_float_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(values) & (values == np.round(values))):
            bad = values[~(np.isfinite(values) & (values == np.round(values)))][:3].tolist()
            raise DatasetFormatError(
                f"{where}: label column {column!r} holds non-integer numbers (e.g. {bad}); "
                "labels must be class names or integers"
            )
        series = series.astype(np.int64)
    categories = _sorted_values(series)
    if len(categories) < 2:
        raise DatasetFormatError(
            f"{where}: label column {column!r} has {len(categories)} distinct value(s) "
            f"{[str(v) for v in categories]}; classification needs at least 2 classes"
        )
    codes = _codes(series, categories)
    return codes.astype(np.int64), tuple(str(v) for v in categories)


def _features(
    df: Any, columns: list[str], where: str, missing: str
) -> tuple[np.ndarray, tuple[str, ...]]:
    from pandas.api import types

    blocks: list[np.ndarray] = []
    names: list[str] = []
    nan_counts: dict[str, int] = {}
    for col in columns:
        s = df[col]
        if types.is_bool_dtype(s.dtype) or not types.is_numeric_dtype(s.dtype):
            if types.is_datetime64_any_dtype(s.dtype) or types.is_timedelta64_dtype(s.dtype):
                raise DatasetFormatError(
                    f"{where}: column {col!r} holds dates/times ({s.dtype}); convert it to "
                    "numbers or drop it"
                )
            check_text_column(s, col, where)
            categories = _sorted_values(s)
            if len(categories) > MAX_CATEGORIES:
                raise DatasetFormatError(
                    f"{where}: text column {col!r} has {len(categories)} distinct values (at "
                    f"most {MAX_CATEGORIES} are one-hot encoded); it is probably an id or free "
                    f"text: drop it or encode it yourself{_numeric_hint(s)}"
                )
            codes = _codes(s, categories)
            block = np.zeros((len(s), len(categories)), dtype=np.float32)
            present = codes >= 0  # missing values stay all zeros
            block[np.flatnonzero(present), codes[present]] = 1.0
            blocks.append(block)
            names += [f"{col}={v}" for v in categories]
            continue
        if types.is_complex_dtype(s.dtype):
            raise DatasetFormatError(f"{where}: column {col!r} holds complex numbers")
        values = s.to_numpy(dtype=np.float32, na_value=np.nan)
        nans = int(np.isnan(values).sum())
        if nans == len(values):
            raise DatasetFormatError(f"{where}: column {col!r} has no values at all; drop it")
        if nans:
            nan_counts[col] = nans
        if np.isinf(values).any():
            raise DatasetFormatError(
                f"{where}: column {col!r} holds {int(np.isinf(values).sum())} infinite values "
                "(or values too large for float32); clean the file"
            )
        blocks.append(values[:, None])
        names.append(col)
    if nan_counts and missing == "refuse":
        listed = ", ".join(f"{c!r} ({n})" for c, n in nan_counts.items())
        raise DatasetFormatError(
            f"{where}: {sum(nan_counts.values())} missing values in numeric columns {listed}. "
            "Set `data.missing: impute` to fill them from the public set's statistics, or clean "
            "the file (fill or drop those rows)"
        )
    return np.ascontiguousarray(np.concatenate(blocks, axis=1)), tuple(names)


def _split_column(series: Any, where: str) -> np.ndarray:
    text = series.astype("string").str.strip().str.lower()
    ok = text.isin(["train", "test"]).fillna(False).to_numpy(dtype=bool)
    if not ok.all():
        bad = np.flatnonzero(~ok)
        shown = sorted(
            {"(empty)" if v is None or v != v else str(v) for v in series.iloc[bad[:20]]}
        )[:5]
        raise DatasetFormatError(
            f"{where}: column {SPLIT_COLUMN!r} must be 'train' or 'test' (any case) in every "
            f"row; {len(bad)} rows are not (data rows {_rows(bad)}, values {shown}). Fix them, "
            f"or rename the column to use a random split"
        )
    is_test = (text == "test").to_numpy(dtype=bool)
    for name, rows in (("train", ~is_test), ("test", is_test)):
        if not rows.any():
            raise DatasetFormatError(f"{where}: column {SPLIT_COLUMN!r} marks no row as {name!r}")
    return is_test


def _sorted_values(series: Any) -> list[Any]:
    """Distinct non-missing values, sorted: numbers numerically, text lexicographically."""
    values = list(series.dropna().unique())
    try:
        return sorted(values)
    except TypeError:  # mixed types (possible in Parquet object columns): order by text
        return sorted(values, key=str)


def _codes(series: Any, categories: list[Any]) -> np.ndarray:
    """Index of each row's value in `categories`; -1 where the value is missing."""
    import pandas as pd

    return np.asarray(pd.Categorical(series, categories=categories).codes, dtype=np.int64)


def _numeric_hint(series: Any) -> str:
    import pandas as pd

    numbers = pd.to_numeric(series, errors="coerce")
    if numbers.notna().mean() < 0.9:
        return ""
    odd = series[numbers.isna() & series.notna()].astype(str).unique()[:3].tolist()
    return f". If it should be numeric, these values are not numbers: {odd}"


def _rows(positions: np.ndarray) -> str:
    shown = ", ".join(str(int(p) + 1) for p in positions[:5])
    return shown + (", ..." if len(positions) > 5 else "")


def _listing(columns: list[str]) -> str:
    if len(columns) <= 20:
        return str(columns)
    return f"{columns[:20]} ... ({len(columns)} columns)"


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."
