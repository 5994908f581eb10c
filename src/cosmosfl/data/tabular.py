"""Reading tables (CSV, TSV, Parquet): a dataset's labelled file, the public set U of a site
federation, and a site's own labelled file, each into float32 feature arrays and int64 labels.

`read_table` returns a dict with `x_train, y_train, x_test, y_test`, `classes` (tuple of str,
`classes[i]` names label i) and `feature_names` (tuple of str, one per column of x);
`read_public_table` U's features and the `FeatureSchema` they fix; `read_site_table` a site's
table encoded with U's schema.

Every file passes the same steps, so it becomes the same arrays on every machine: its cells are
cleaned (`data/cleaning.py`: spaces, missing-value markers, decimal commas, separators), its
columns encoded by the one table encoder (`data/schema.py`: one-hot blocks, the category limit,
missing and infinite values, labels and their order), and its rows split:

- Labels: the label column (`read_table`'s default: the last column other than `split`) holds
  strings, integers or booleans; its distinct values, sorted (numbers numerically, text
  lexicographically), become labels 0..M-1 and `classes` are their string forms.
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
    clean_frame,
    decode_error,
    separator_hint,
    sniff_separator,
)
from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.data.schema import (
    MAX_CATEGORIES,
    MISSING_POLICIES,
    SPLIT_COLUMN,
    FeatureSchema,
    check_missing,
    data_rows,
    encode,
    encode_labels,
)
from cosmosfl.data.splitting import check_test_fraction, split_arrays, stratified_test_mask

__all__ = [
    "MAX_CATEGORIES",
    "MISSING_POLICIES",
    "TABLE_SUFFIXES",
    "MissingDependencyError",
    "read_frame",
    "read_public_table",
    "read_site_table",
    "read_table",
]

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
    check_missing(missing)
    test_fraction = check_test_fraction(test_fraction)
    df, where = _frame(path, sep, encoding)
    columns = list(df.columns)
    if not columns:
        raise DatasetFormatError(f"{where}: the table has no columns")
    has_split = _has_split(columns, label_column)
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
    _check_rows(df, where)
    y, classes = encode_labels(df[label_column], where, label_column)
    schema = FeatureSchema.from_frame(df, features, where)
    x = encode(df, schema, where, missing)
    is_test = _test_rows(df, y, classes, has_split, test_fraction, seed, where)
    return {
        **split_arrays(x, y, is_test),
        "classes": classes,
        "feature_names": schema.feature_names,
    }


def read_public_table(
    path: str | Path,
    *,
    label_column: str | None = None,
    missing: str = "refuse",
    sep: str | None = None,
    encoding: str | None = None,
) -> tuple[np.ndarray, FeatureSchema]:
    """U of a site federation from a table: (x float32 (N, D), the schema it fixes).

    Every column is a feature, except `label_column` and `split` when present (U is unlabelled:
    a copy of a labelled file may keep its label column, which is dropped, never read)."""
    check_missing(missing)
    df, where = _frame(path, sep, encoding)
    _check_rows(df, where)
    columns = [c for c in df.columns if c not in {label_column, SPLIT_COLUMN}]
    if not columns:
        raise DatasetFormatError(
            f"{where}: the public set has no feature columns{separator_hint(df)}"
        )
    schema = FeatureSchema.from_frame(df, columns, where)
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
    text, in label order, `classes[i]` naming y == i (the caller maps them onto the run's label
    set). `label_column` None: the last column that is neither a feature of U nor `split`. A
    site may hold a single class. The split as `read_table`'s."""
    check_missing(missing)
    test_fraction = check_test_fraction(test_fraction)
    df, where = _frame(path, sep, encoding)
    _check_rows(df, where)
    has_split = _has_split(list(df.columns), label_column)
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
            f"{_listing(list(df.columns))}"
        )
    absent = [c for c in schema.columns if c not in df.columns]
    extra = [c for c in others if c != label_column]
    if absent or extra:
        raise DatasetFormatError(
            f"{where}: the feature columns must be the public set's"
            + (f"; missing {absent}" if absent else "")
            + (f"; not in the public set {extra} (drop them)" if extra else "")
        )
    y, classes = encode_labels(df[label_column], where, label_column, min_classes=1)
    x = encode(df, schema, where, missing)
    is_test = _test_rows(df, y, classes, has_split, test_fraction, seed, where)
    return {**split_arrays(x, y, is_test), "classes": classes}


def _frame(path: str | Path, sep: str | None, encoding: str | None) -> tuple[Any, str]:
    path = Path(path).expanduser()
    df = read_frame(path, sep, encoding)
    df.columns = [str(c) for c in df.columns]
    return df, str(path)


def _check_rows(df: Any, where: str) -> None:
    if len(df) == 0:
        raise DatasetFormatError(f"{where}: the table has a header but no data rows")


def _has_split(columns: list[str], label_column: str | None) -> bool:
    """Whether a `split` column gives the split (unless it is the named label column)."""
    return SPLIT_COLUMN in columns and label_column != SPLIT_COLUMN


def _test_rows(
    df: Any,
    y: np.ndarray,
    classes: tuple[str, ...],
    has_split: bool,
    test_fraction: float,
    seed: int,
    where: str,
) -> np.ndarray:
    """Which rows are test rows: the `split` column's, else a seeded stratified fraction."""
    if has_split:
        return _split_column(df[SPLIT_COLUMN], where)
    return stratified_test_mask(y, test_fraction, seed, where, classes, "rows")


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
            f"row; {len(bad)} rows are not (data rows {data_rows(bad)}, values {shown}). Fix "
            f"them, or rename the column to use a random split"
        )
    is_test = (text == "test").to_numpy(dtype=bool)
    for name, rows in (("train", ~is_test), ("test", is_test)):
        if not rows.any():
            raise DatasetFormatError(f"{where}: column {SPLIT_COLUMN!r} marks no row as {name!r}")
    return is_test


def read_frame(path: Path, sep: str | None = None, encoding: str | None = None) -> Any:
    """The table at `path` as a DataFrame, cleaned by `cleaning.clean_frame` (the one place the
    cell rules live, for datasets, U and site files alike)."""
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


def _listing(columns: list[str]) -> str:
    if len(columns) <= 20:
        return str(columns)
    return f"{columns[:20]} ... ({len(columns)} columns)"


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."
