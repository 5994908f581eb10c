"""How a table's cells are read as the user meant, before any column is encoded.

Every table (a dataset, the public set U, a site's file) passes through `read_frame`, so each
rule below holds for all of them:

- The separator of a `.csv` file is `,` unless named (`data.sep`); a file that reads as a single
  column whose header holds `;`, a tab or `|` is read again with that separator (sniffed).
- Text is UTF-8 unless named (`data.encoding`); a file that is not is refused with one line
  naming the option.
- Column names and text cells are stripped of surrounding spaces; values that differed only by
  those spaces become one value, with a warning naming them.
- Missing-value markers (`MISSING_MARKERS`: empty, `?`, `-`, `NA`, `N/A`, `NaN`, `null`, ...)
  are missing values.
- A text column whose every value is a number (after the two rules above) is numeric; with
  decimal commas (`1,5`) too, with a warning (and refused when every comma could be a
  thousands separator, `1,234`).
- Duplicate column names are refused (pandas would rename them `x.1` and read on).

`check_text_column` is the rule for a column that stays text in a feature position: when nearly
all of its cells are numbers it is refused (a few bad cells in a numeric column), never one-hot
encoded.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from cosmosfl.data.errors import DatasetFormatError

__all__ = [
    "MISSING_MARKERS",
    "NUMERIC_SHARE",
    "check_text_column",
    "clean_frame",
    "decode_error",
    "separator_hint",
    "sniff_separator",
]

MISSING_MARKERS = frozenset(
    {"", "?", "-", "NA", "N/A", "n/a", "na", "NaN", "nan", "null", "NULL", "None", "none",
     "<NA>", "#N/A", "#NA"}
)  # fmt: skip
# Of a text column's non-missing cells, at least this share being numbers makes it a numeric
# column with a few bad cells, not a category.
NUMERIC_SHARE = 0.9
SNIFFED_SEPARATORS = (";", "\t", "|")
_DECIMAL_COMMA = re.compile(r"^[+-]?\d*,\d+$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3},\d{3}$")


def sniff_separator(header: str) -> str | None:
    """The separator a one-column header suggests (the most frequent of ; tab |), or None."""
    counts = {sep: header.count(sep) for sep in SNIFFED_SEPARATORS}
    best = max(counts, key=lambda s: counts[s])
    return best if counts[best] > 0 else None


def separator_hint(df: Any) -> str:
    """For messages about columns: which separator the file was read with (CSV files)."""
    sep = df.attrs.get("sep")
    if sep is None:
        return ""
    return f" (read with separator {sep!r}; set data.sep if the file uses another)"


def decode_error(path: Path, exc: UnicodeDecodeError, encoding: str | None) -> DatasetFormatError:
    """One line for a file that is not in the expected text encoding."""
    used = encoding or "utf-8"
    return DatasetFormatError(
        f"{path}: not {used} text (byte {exc.object[exc.start : exc.start + 1]!r} at position "
        f"{exc.start}); set data.encoding to the file's encoding (e.g. latin-1 or cp1252)"
    )


def clean_frame(df: Any, where: str, raw_header: list[Any] | None = None) -> Any:
    """`df` with the rules of the module docstring applied (names, spaces, markers, numbers).

    `raw_header`: the header row as written (pandas renames duplicate names, so duplicates are
    judged on this when given)."""
    from pandas.api import types

    names = [str(c).strip() for c in (raw_header if raw_header is not None else df.columns)]
    if len(names) != len(df.columns):
        names = [str(c).strip() for c in df.columns]
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    dups = [n for n, k in seen.items() if k > 1]
    if dups:
        raise DatasetFormatError(
            f"{where}: duplicate column names {dups[:5]}; give every column its own name "
            "(spaces around names do not count)"
        )
    df.columns = names
    merged: dict[str, list[str]] = {}
    commas: list[str] = []
    for col in names:
        s = df[col]
        if not (types.is_object_dtype(s.dtype) or types.is_string_dtype(s.dtype)):
            continue
        df[col], merges, comma = _clean_text_cells(s, col, where)
        if merges:
            merged[col] = merges
        if comma:
            commas.append(col)
    if merged:
        listed = "; ".join(f"{c!r}: {', '.join(m[:3])}" for c, m in merged.items())
        warnings.warn(
            f"{where}: values that differ only in surrounding spaces were merged ({listed}); "
            "cosmosfl ignores spaces around text",
            UserWarning,
            stacklevel=4,
        )
    if commas:
        warnings.warn(
            f"{where}: columns {commas[:5]} use decimal commas ('1,5'); read as numbers",
            UserWarning,
            stacklevel=4,
        )
    return df


def _clean_text_cells(series: Any, col: str, where: str) -> tuple[Any, list[str], bool]:
    """(cleaned column, the merged values as "'a' + 'a '", whether decimal commas were read)."""
    import pandas as pd

    raw = series.astype(object)
    present = raw.notna()
    stripped = raw.map(lambda v: v.strip() if isinstance(v, str) else v)
    marker = stripped.map(lambda v: isinstance(v, str) and v in MISSING_MARKERS)
    stripped = stripped.where(~marker, None)
    merges: list[str] = []
    texts = raw[present & ~marker].map(lambda v: isinstance(v, str))
    if texts.any():
        originals = raw[present & ~marker][texts]
        groups = originals.groupby(originals.map(str.strip)).unique()
        merges = [" + ".join(repr(v) for v in vals) for vals in groups if len(vals) > 1]
    kept = stripped[stripped.notna()]
    if len(kept) == 0:
        return stripped.astype(object), merges, False
    if kept.map(lambda v: isinstance(v, bool | np.bool_)).any():
        return stripped, merges, False  # True/False are a category, not the numbers 1/0
    numbers = pd.to_numeric(kept, errors="coerce")
    if numbers.notna().all():
        return pd.to_numeric(stripped, errors="coerce"), merges, False
    text = kept.map(str)
    is_comma = text.map(lambda v: bool(_DECIMAL_COMMA.match(v)))
    if is_comma.any() and (is_comma | numbers.notna()).all():
        if text[is_comma].map(lambda v: bool(_THOUSANDS.match(v))).all():
            shown = text[is_comma].unique()[:3].tolist()
            raise DatasetFormatError(
                f"{where}: column {col!r} holds values like {shown}: decimal commas or "
                "thousands separators? Write the numbers with a decimal point and no separator"
            )
        fixed = stripped.map(lambda v: v.replace(",", ".") if isinstance(v, str) else v)
        return pd.to_numeric(fixed, errors="coerce"), merges, True
    return stripped, merges, False


def check_text_column(series: Any, col: str, where: str) -> None:
    """Refuse a feature column that stayed text though nearly all its cells are numbers: a
    numeric column with a few bad cells, which one-hot encoding would silently mangle."""
    import pandas as pd

    kept = series.dropna()
    if len(kept) == 0 or kept.map(lambda v: isinstance(v, bool | np.bool_)).any():
        return
    numbers = pd.to_numeric(kept.map(str), errors="coerce")
    share = float(numbers.notna().mean())
    if share < NUMERIC_SHARE or share == 1.0:
        return
    bad_mask = (
        series.notna().to_numpy()
        & ~pd.to_numeric(
            series.map(lambda v: v if v is None or v != v else str(v)), errors="coerce"
        )
        .notna()
        .to_numpy()
    )
    rows = np.flatnonzero(bad_mask)
    shown = sorted({str(v) for v in series.iloc[rows[:20]]})[:3]
    where_rows = ", ".join(str(int(r) + 1) for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
    raise DatasetFormatError(
        f"{where}: column {col!r} looks numeric but {len(rows)} cell(s) are not numbers: "
        f"{shown} (data rows {where_rows}); it is not one-hot encoded: fix those cells or "
        "leave them empty (empty, ?, NA and - are read as missing)"
    )
