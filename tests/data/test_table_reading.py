"""Tables are read as the user meant (data/cleaning.py): spaces, missing-value markers, numbers
with a few bad cells, decimal commas, separators, encodings and duplicate names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosmosfl.data import DataError
from cosmosfl.data.sources import load_dataset
from cosmosfl.data.tabular import read_table
from cosmosfl.experiment.config import load_config


def _write(tmp_path: Path, text: str, name: str = "t.csv", encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def _rows(n: int, label: callable, x: callable = lambda i: f"{i / 4}") -> str:  # type: ignore[valid-type]
    return "".join(f"{x(i)},{label(i)}\n" for i in range(n))


def test_labels_differing_by_a_trailing_space_are_one_class_with_a_warning(tmp_path):
    text = "x,soil\n" + _rows(30, lambda i: ["red soil", "red soil ", "grey soil"][i % 3])
    with pytest.warns(UserWarning, match=r"'red soil' \+ 'red soil '.*merged|merged.*red soil"):
        d = read_table(_write(tmp_path, text))
    assert d["classes"] == ("grey soil", "red soil")


def test_spaces_around_text_cells_and_names_are_stripped(tmp_path):
    text = " x , colour ,y\n" + "".join(
        f"{i}, {'blue' if i % 2 else 'green'} ,{i % 2}\n" for i in range(20)
    )
    d = read_table(_write(tmp_path, text))
    assert d["feature_names"] == ("x", "colour=blue", "colour=green")


@pytest.mark.parametrize("marker", ["?", "NA", "", "-", " ? "])
def test_missing_value_markers_are_missing_not_a_text_column(marker, tmp_path):
    values = [str(i / 7) for i in range(30)]
    values[4] = marker
    text = "x,y\n" + "".join(f"{v},{i % 2}\n" for i, v in enumerate(values))
    path = _write(tmp_path, text)
    with pytest.raises(DataError, match=r"missing values in numeric columns 'x' \(1\)"):
        read_table(path)
    d = read_table(path, missing="impute", test_fraction=0.2)
    assert d["feature_names"] == ("x",)  # numeric, not one-hot encoded
    x = np.concatenate([d["x_train"], d["x_test"]])
    assert np.isnan(x).sum() == 1


def test_a_numeric_column_with_a_few_text_cells_is_reported_not_one_hot_encoded(tmp_path):
    values = [str(i) for i in range(20)]
    values[7] = "twelve"
    text = "x,y\n" + "".join(f"{v},{i % 2}\n" for i, v in enumerate(values))
    with pytest.raises(DataError, match=r"'x' looks numeric but 1 cell\(s\) .*'twelve'.*rows 8"):
        read_table(_write(tmp_path, text))


def test_decimal_commas_are_numbers(tmp_path):
    text = "x;y\n" + "".join(f"{i},5;{i % 2}\n" for i in range(20))
    with pytest.warns(UserWarning, match="decimal commas"):
        d = read_table(_write(tmp_path, text))
    assert d["feature_names"] == ("x",)
    x = np.sort(np.concatenate([d["x_train"], d["x_test"]])[:, 0])
    assert x[0] == pytest.approx(0.5) and x[-1] == pytest.approx(19.5)
    ambiguous = "x;y\n" + "".join(f"1,{100 + i};{i % 2}\n" for i in range(20))
    with pytest.raises(DataError, match="decimal commas or thousands separators"):
        read_table(_write(tmp_path, ambiguous, "b.csv"))


def test_semicolon_separated_csv_is_sniffed_or_named(tmp_path):
    text = "a;b;y\n" + "".join(f"{i};{2 * i};{i % 2}\n" for i in range(20))
    d = read_table(_write(tmp_path, text))
    assert d["feature_names"] == ("a", "b")
    assert load_dataset(str(_write(tmp_path, text, "s.csv")), sep=";").x_train.shape[1] == 2
    assert load_config(None, ["data.sep=;"]).data.sep == ";"
    one = "y\n" + "".join(f"{i % 2}\n" for i in range(20))
    with pytest.raises(DataError, match=r"no feature columns.*separator ','.*data\.sep"):
        read_table(_write(tmp_path, one, "one.csv"))


def test_a_latin1_file_names_the_encoding_option(tmp_path):
    text = "x,city\n" + "".join(f"{i},{'Zürich' if i % 2 else 'Genève'}\n" for i in range(20))
    path = _write(tmp_path, text, encoding="latin-1")
    with pytest.raises(DataError, match=r"not utf-8 text.*data\.encoding") as err:
        read_table(path)
    assert "\n" not in str(err.value)
    d = read_table(path, encoding="latin-1")
    assert d["classes"] == ("Genève", "Zürich")
    assert load_config(None, ["data.encoding=latin-1"]).data.encoding == "latin-1"


def test_duplicate_column_names_are_refused(tmp_path):
    text = "x,x,y\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(20))
    with pytest.raises(DataError, match=r"duplicate column names \['x'\]"):
        read_table(_write(tmp_path, text))
    # a duplicated label column name: the first (a feature) must not be taken as the label
    text = "y,x,y\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(20))
    with pytest.raises(DataError, match=r"duplicate column names \['y'\]"):
        read_table(_write(tmp_path, text, "b.csv"), label_column="y")


# -- fuzzing: any small table loads with the documented result, or is one DataError line ----
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NUMBER = st.one_of(
    st.integers(-5, 5).map(str),
    st.floats(-1e3, 1e3, allow_nan=False, width=32).map(lambda v: f"{v:.3f}"),
)
ODD = st.sampled_from(["", "?", "NA", "-", " ", "nan", "inf", "-inf", "1,5", "1e3", "x", " 2 "])
TEXT = st.sampled_from(["a", "b", " a", "a ", "B", "x y", "True", "false"])
CELL_OF = {  # a column's kind decides its cells: mostly numbers, mostly text, or anything
    "numeric": st.one_of(NUMBER, NUMBER, NUMBER, ODD),
    "text": st.one_of(TEXT, TEXT, ODD),
    "mixed": st.one_of(NUMBER, TEXT, ODD),
}
COMMON = st.sampled_from(["red", "red ", " red", "blue", "blue "])
LABEL = st.one_of(COMMON, COMMON, COMMON, COMMON, st.sampled_from(["?", "green", "1", "blue"]))


@st.composite
def tables(draw):
    """A small CSV: 1-3 feature columns (numeric, text or mixed cells, markers, spaces, inf,
    decimal commas), a label column last, sometimes a duplicated or space-padded name."""
    width = draw(st.integers(1, 3))
    names = [f"f{i}" for i in range(width)] + ["label"]
    if draw(st.integers(0, 4)) == 0:  # a duplicate name, now and then
        names[draw(st.integers(0, width))] = names[draw(st.integers(0, width))]
    if draw(st.booleans()):
        names[0] = f" {names[0]} "
    kinds = [draw(st.sampled_from(sorted(CELL_OF))) for _ in range(width)]
    rows = draw(st.integers(4, 16))
    label = LABEL if draw(st.integers(0, 3)) == 0 else COMMON  # "?": a row without a label
    body = [[draw(CELL_OF[k]) for k in kinds] + [draw(label)] for _ in range(rows)]
    text = ",".join(names) + "\n"
    text += "".join(",".join(f'"{c}"' if "," in c else c for c in row) + "\n" for row in body)
    return text, rows


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=tables(), missing=st.sampled_from(["refuse", "impute"]))
def test_fuzzed_tables_load_as_documented_or_raise_one_data_error_line(tmp_path, table, missing):
    text, rows = table
    path = tmp_path / "fuzz.csv"
    path.write_text(text)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # merges and decimal commas warn
        try:
            d = read_table(path, missing=missing, test_fraction=0.5)
        except DataError as err:
            assert "\n" not in str(err) and str(err).strip()
            return
    x = np.concatenate([d["x_train"], d["x_test"]])
    y = np.concatenate([d["y_train"], d["y_test"]])
    assert x.dtype == np.float32 and y.dtype == np.int64 and len(x) == len(y) == rows
    assert x.shape[1] == len(d["feature_names"]) == len(set(d["feature_names"]))
    assert all(n == n.strip() and "= " not in n for n in d["feature_names"])
    assert not np.isinf(x).any()  # infinite values are refused
    assert missing == "impute" or not np.isnan(x).any()
    classes = d["classes"]
    assert len(classes) >= 2 and len(set(classes)) == len(classes)
    assert all(c == c.strip() for c in classes)  # spaces stripped: no near-duplicate classes
    assert set(np.unique(y)) <= set(range(len(classes)))
