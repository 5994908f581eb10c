"""read_table: CSV/TSV/Parquet into float32 features, int64 labels, documented encodings."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosmosfl.data.errors import DatasetFormatError, DatasetNotFoundError
from cosmosfl.data.tabular import MissingDependencyError, read_table

SATELLITE = Path(__file__).resolve().parents[3] / "shared" / "data" / "satellite.csv"


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _balanced(n_per_class: int = 10, labels: tuple[str, ...] = ("b", "a", "c")) -> pd.DataFrame:
    """Rows in file order with an increasing `row` feature, so order and membership are visible."""
    n = n_per_class * len(labels)
    return pd.DataFrame({"row": np.arange(n), "label": [labels[i % len(labels)] for i in range(n)]})


def test_csv_string_labels_sorted_and_arrays_typed(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    _balanced().to_csv(path, index=False)
    d = read_table(path)
    assert d["classes"] == ("a", "b", "c")  # sorted, not file order ("b" first)
    assert d["feature_names"] == ("row",)
    for split in ("train", "test"):
        x, y = d[f"x_{split}"], d[f"y_{split}"]
        assert x.dtype == np.float32 and x.ndim == 2 and x.flags["C_CONTIGUOUS"]
        assert y.dtype == np.int64 and len(x) == len(y)
    rows = np.concatenate([d["x_train"][:, 0], d["x_test"][:, 0]])
    assert sorted(rows.tolist()) == list(range(30))
    # Row i has label "bac"[i % 3]; check the mapping survives the split.
    for split in ("train", "test"):
        expect = np.array(
            [{"b": 1, "a": 0, "c": 2}["bac"[int(r) % 3]] for r in d[f"x_{split}"][:, 0]]
        )
        np.testing.assert_array_equal(d[f"y_{split}"], expect)


def test_integer_labels_sort_numerically(tmp_path: Path) -> None:
    df = pd.DataFrame({"f": range(12), "y": [10, 2, 33] * 4})
    df.to_csv(tmp_path / "t.csv", index=False)
    d = read_table(tmp_path / "t.csv")
    assert d["classes"] == ("2", "10", "33")  # lexicographic order would put "10" first
    y = np.concatenate([d["y_train"], d["y_test"]])
    f = np.concatenate([d["x_train"][:, 0], d["x_test"][:, 0]]).astype(int)
    np.testing.assert_array_equal(y, np.array([1, 0, 2])[f % 3])


def test_bool_labels_and_chosen_label_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, "ok,a,b\n" + "".join(f"{i % 2 == 0},{i},{-i}\n" for i in range(8)))
    d = read_table(path, label_column="ok")
    assert d["classes"] == ("False", "True")
    assert d["feature_names"] == ("a", "b")
    x = np.concatenate([d["x_train"], d["x_test"]])
    y = np.concatenate([d["y_train"], d["y_test"]])
    np.testing.assert_array_equal(y, (x[:, 0].astype(int) % 2 == 0).astype(np.int64))


def test_missing_label_column_lists_columns(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,b,class\n1,2,x\n3,4,y\n")
    with pytest.raises(
        DatasetFormatError, match=r"label column 'target' not found.*\['a', 'b', 'class'\]"
    ):
        read_table(path, label_column="target")


def test_text_columns_one_hot_sorted_missing_all_zeros(tmp_path: Path) -> None:
    rows = ["red", "blue", "", "red"] * 3
    text = "n,colour,y\n" + "".join(f"{i},{c},{'pq'[i % 2]}\n" for i, c in enumerate(rows))
    d = read_table(_csv(tmp_path, text), test_fraction=0.25)
    assert d["feature_names"] == ("n", "colour=blue", "colour=red")
    x = np.concatenate([d["x_train"], d["x_test"]])
    x = x[np.argsort(x[:, 0])]
    expect = {"red": [0, 1], "blue": [1, 0], "": [0, 0]}
    np.testing.assert_array_equal(x[:, 1:], np.array([expect[c] for c in rows], np.float32))


def test_text_column_with_too_many_values_is_refused(tmp_path: Path) -> None:
    ok = "".join(f"id{i % 50},{i % 2}\n" for i in range(100))
    assert read_table(_csv(tmp_path, "name,y\n" + ok))["x_train"].shape[1] == 50  # the limit
    many = "".join(f"id{i},{i % 2}\n" for i in range(51))
    with pytest.raises(DatasetFormatError, match=r"text column 'name' has 51 distinct values"):
        read_table(_csv(tmp_path, "name,y\n" + many))


def test_text_column_that_should_be_numeric_gets_a_hint(tmp_path: Path) -> None:
    values = [str(i / 7) for i in range(60)]
    values[5] = "n.a."
    path = _csv(tmp_path, "v,y\n" + "".join(f"{v},{i % 2}\n" for i, v in enumerate(values)))
    with pytest.raises(DatasetFormatError, match=r"'v'.*not numbers: \['n.a.'\]"):
        read_table(path)


def test_missing_numeric_values_refused_or_kept_as_nan(tmp_path: Path) -> None:
    text = "a,b,y\n" + "".join(
        f"{'' if i in (3, 7) else i},{'' if i == 5 else 1},{i % 2}\n" for i in range(10)
    )
    path = _csv(tmp_path, text)
    with pytest.raises(DatasetFormatError, match=r"3 missing values.*'a' \(2\), 'b' \(1\).*impute"):
        read_table(path)
    d = read_table(path, missing="impute", test_fraction=0.4)
    x = np.concatenate([d["x_train"], d["x_test"]])
    assert x.dtype == np.float32
    assert np.isnan(x[:, 0]).sum() == 2 and np.isnan(x[:, 1]).sum() == 1
    with pytest.raises(ValueError, match="missing must be one of"):
        read_table(path, missing="drop")


def test_split_column_used_case_insensitive_and_dropped(tmp_path: Path) -> None:
    marks = ["Train", "TEST ", "train", "train", "test", "train"]
    text = "f,split,y\n" + "".join(f"{i},{m},{i % 2}\n" for i, m in enumerate(marks))
    d = read_table(_csv(tmp_path, text))
    assert d["feature_names"] == ("f",)
    np.testing.assert_array_equal(d["x_train"][:, 0], [0, 2, 3, 5])  # file order kept
    np.testing.assert_array_equal(d["x_test"][:, 0], [1, 4])
    np.testing.assert_array_equal(d["y_test"], [1, 0])


def test_split_column_with_other_values_is_refused(tmp_path: Path) -> None:
    text = "f,split,y\n0,train,a\n1,val,b\n2,test,a\n3,train,b\n"
    with pytest.raises(DatasetFormatError, match=r"'split' must be 'train' or 'test'.*rows 2.*val"):
        read_table(_csv(tmp_path, text))
    with pytest.raises(DatasetFormatError, match="marks no row as 'test'"):
        read_table(_csv(tmp_path, "f,split,y\n0,train,a\n1,train,b\n"))


def test_stratified_split_is_seeded_and_proportional(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    df = pd.DataFrame({"row": np.arange(100), "y": ["a"] * 60 + ["b"] * 40})
    df.to_csv(path, index=False)
    d0, again, d1 = read_table(path, seed=0), read_table(path, seed=0), read_table(path, seed=1)
    np.testing.assert_array_equal(d0["x_test"], again["x_test"])
    assert not np.array_equal(d0["x_test"], d1["x_test"])
    assert np.bincount(d0["y_test"]).tolist() == [12, 8]  # 20% of each class
    assert np.all(np.diff(d0["x_train"][:, 0]) > 0) and np.all(np.diff(d0["x_test"][:, 0]) > 0)


@pytest.mark.parametrize("fraction", [0, 1, 1.5, -0.1, True, "0.2"])
def test_test_fraction_must_lie_in_open_unit_interval(tmp_path: Path, fraction: object) -> None:
    with pytest.raises(ValueError, match="test_fraction must be a number in"):
        read_table(_csv(tmp_path, "a,y\n1,x\n2,z\n"), test_fraction=fraction)  # type: ignore[arg-type]


def test_class_too_small_to_split_is_a_clear_error(tmp_path: Path) -> None:
    text = "a,y\n" + "".join(f"{i},big\n" for i in range(9)) + "9,lonely\n"
    with pytest.raises(DatasetFormatError, match=r"single row.*at least 2 rows per class"):
        read_table(_csv(tmp_path, text))
    with pytest.raises(DatasetFormatError, match="lower test_fraction"):
        read_table(_csv(tmp_path, "a,y\n1,x\n2,x\n3,z\n4,z\n"), test_fraction=0.9)


def test_rows_without_label_and_single_class_refused(tmp_path: Path) -> None:
    text = "a,y\n1,x\n2,\n3,z\n4,\n"
    with pytest.raises(
        DatasetFormatError, match=r"2 rows have no label in column 'y' \(data rows 2, 4"
    ):
        read_table(_csv(tmp_path, text))
    with pytest.raises(DatasetFormatError, match="at least 2 classes"):
        read_table(_csv(tmp_path, "a,y\n1,x\n2,x\n"))
    with pytest.raises(DatasetFormatError, match="non-integer numbers"):
        read_table(_csv(tmp_path, "a,y\n1,0.5\n2,1.0\n"))


def test_empty_and_degenerate_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError, match="the file is empty"):
        read_table(_csv(tmp_path, ""))
    with pytest.raises(DatasetFormatError, match="no data rows"):
        read_table(_csv(tmp_path, "a,y\n"))
    with pytest.raises(DatasetFormatError, match="no feature columns besides the label column 'y'"):
        read_table(_csv(tmp_path, "y\nx\nz\n"))
    with pytest.raises(DatasetNotFoundError, match="does not exist"):
        read_table(tmp_path / "absent.csv")
    with pytest.raises(DatasetFormatError, match=r"not a readable table \(.*fields"):
        read_table(_csv(tmp_path, "a,y\n1,x\n2,z,3,4\n"))
    with pytest.raises(DatasetFormatError, match="unknown table format"):
        read_table(_csv(tmp_path, "a,y\n1,x\n", name="t.xlsx"))


def test_tsv_and_gzip_csv(tmp_path: Path) -> None:
    text = "a\tb\ty\n" + "".join(f"{i}\t{2 * i}\t{'uv'[i % 2]}\n" for i in range(10))
    d = read_table(_csv(tmp_path, text, name="t.tsv"))
    assert d["feature_names"] == ("a", "b") and d["classes"] == ("u", "v")
    gz = tmp_path / "t.csv.gz"
    gz.write_bytes(gzip.compress(text.replace("\t", ",").encode()))
    np.testing.assert_array_equal(read_table(gz)["x_test"], d["x_test"])


def test_parquet_matches_csv_and_encodes_bools(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "n": np.arange(10, dtype=np.int64),
            "flag": [True, False] * 5,
            "kind": pd.Categorical(["x", "y"] * 5),
            "y": ["p", "q"] * 5,
        }
    )
    df.to_parquet(tmp_path / "t.parquet")
    df.to_csv(tmp_path / "t.csv", index=False)
    dp, dc = read_table(tmp_path / "t.parquet"), read_table(tmp_path / "t.csv")
    assert dp["feature_names"] == ("n", "flag=False", "flag=True", "kind=x", "kind=y")
    assert dp["feature_names"] == dc["feature_names"] and dp["classes"] == dc["classes"]
    np.testing.assert_array_equal(dp["x_train"], dc["x_train"])
    np.testing.assert_array_equal(dp["y_test"], dc["y_test"])
    pd.DataFrame({"n": pd.array([1, None, 3, 4], dtype="Int64"), "y": list("abab")}).to_parquet(
        tmp_path / "na.pq"
    )
    with pytest.raises(DatasetFormatError, match=r"'n' \(1\)"):
        read_table(tmp_path / "na.pq")


def test_parquet_without_pyarrow_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'cosmosfl\[parquet\]'") as info:
        read_table(path)
    assert isinstance(info.value, ImportError) and isinstance(info.value, DatasetFormatError)


def test_corrupt_parquet_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(DatasetFormatError, match="not a readable table"):
        read_table(path)


@pytest.mark.data
def test_real_satellite_table() -> None:
    if not SATELLITE.is_file():
        pytest.skip(f"{SATELLITE} not found: the real data folder ../shared/data is absent")
    d = read_table(SATELLITE, seed=0)
    assert len(d["y_train"]) + len(d["y_test"]) == 6435
    assert d["x_train"].shape[1] == 36 and len(d["feature_names"]) == 36
    assert d["feature_names"][0] == "x_1"
    assert d["classes"] == (
        "cotton crop",
        "damp grey soil",
        "grey soil",
        "red soil",
        "vegetation stubble",
        "very damp grey soil",
    )
    counts = np.bincount(np.concatenate([d["y_train"], d["y_test"]]))
    assert counts.min() == 626 and counts.max() == 1533  # as the data README documents
    assert 0.19 < len(d["y_test"]) / 6435 < 0.21
    assert d["x_train"].min() >= 0 and d["x_train"].max() <= 255
