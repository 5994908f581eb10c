"""U fixes the feature layout of every site's table (data/schema.py, read by data/tabular.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosmosfl.data.errors import DatasetFormatError
from cosmosfl.data.schema import label_order
from cosmosfl.data.tabular import read_public_table, read_site_table, read_table

PUBLIC = "a,colour,b\n1,red,10\n2,blue,20\n3,red,30\n"


@pytest.fixture
def public(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "public.csv"
    path.write_text(PUBLIC)
    return read_public_table(path)


def test_u_fixes_columns_and_text_values(public) -> None:  # type: ignore[no-untyped-def]
    x, schema = public
    assert schema.columns == ("a", "colour", "b")
    assert schema.feature_names == ("a", "colour=blue", "colour=red", "b")
    np.testing.assert_array_equal(x[1], [2, 1, 0, 20])


def test_a_site_with_reordered_columns_gets_u_s_layout(tmp_path, public) -> None:  # type: ignore[no-untyped-def]
    _, schema = public
    site = tmp_path / "site.csv"
    site.write_text("b,label,colour,a,split\n5,x,blue,7,train\n6,y,red,8,test\n9,x,red,1,train\n")
    arrays = read_site_table(site, schema)
    assert arrays["classes"] == ("x", "y")
    np.testing.assert_array_equal(arrays["x_train"], [[7, 1, 0, 5], [1, 0, 1, 9]])
    np.testing.assert_array_equal(arrays["x_test"], [[8, 0, 1, 6]])
    np.testing.assert_array_equal(arrays["y_test"], [1])


def test_a_text_value_u_never_shows_is_missing_with_a_warning(tmp_path, public) -> None:  # type: ignore[no-untyped-def]
    _, schema = public
    site = tmp_path / "site.csv"
    site.write_text("a,colour,b,y,split\n1,green,2,k,train\n1,red,2,k,test\n")
    with pytest.warns(UserWarning, match="green"):
        arrays = read_site_table(site, schema)
    np.testing.assert_array_equal(arrays["x_train"][0], [1, 0, 0, 2])


def test_a_site_may_hold_a_single_class(tmp_path, public) -> None:  # type: ignore[no-untyped-def]
    _, schema = public
    site = tmp_path / "site.csv"
    site.write_text("a,colour,b,y\n" + "".join(f"{i},red,{i},only\n" for i in range(10)))
    arrays = read_site_table(site, schema, test_fraction=0.2)
    assert arrays["classes"] == ("only",) and len(arrays["y_test"]) == 2


@pytest.mark.parametrize(
    ("header", "needle"),
    [("a,colour,y", "missing ['b']"), ("a,colour,b,extra,y", "not in the public set ['extra']")],
)
def test_feature_columns_must_be_u_s(tmp_path, public, header, needle) -> None:  # type: ignore[no-untyped-def]
    _, schema = public
    site = tmp_path / "site.csv"
    cells = {"a": "1", "colour": "red", "b": "2", "extra": "0", "y": "k"}
    rows = [",".join(cells[c] for c in header.split(",")) for _ in range(4)]
    site.write_text(header + "\n" + "\n".join(rows) + "\n")
    with pytest.raises(DatasetFormatError, match="feature columns must be the public") as err:
        read_site_table(site, schema, label_column="y")
    assert needle in str(err.value)


def test_u_drops_its_label_column(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "public.csv"
    path.write_text("a,b,class\n1,2,x\n3,4,y\n")
    x, schema = read_public_table(path, label_column="class")
    assert schema.columns == ("a", "b") and x.shape == (2, 2)


# -- one encoder for a single table and for sites ----------------------------------------------
MIXED = "a,colour,flag,b,label,split\n" + "".join(
    f"{i / 4},{['red', 'blue', 'green'][i % 3]},{['True', 'False'][i % 2]},{i % 5},"
    f"{['x', 'y'][i % 2]},{'test' if i % 4 == 0 else 'train'}\n"
    for i in range(24)
)


def test_a_table_and_a_site_with_its_layout_are_encoded_alike(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One encoder: `read_table`'s features equal the site reader's with the schema the same
    file fixes as U (text values, booleans, numbers), and so do the labels."""
    path = tmp_path / "mixed.csv"
    path.write_text(MIXED)
    table = read_table(path, label_column="label")
    _, schema = read_public_table(path, label_column="label")
    site = read_site_table(path, schema, label_column="label")
    assert table["feature_names"] == schema.feature_names
    for key in ("x_train", "x_test", "y_train", "y_test"):
        np.testing.assert_array_equal(table[key], site[key])
    assert table["classes"] == site["classes"] == ("x", "y")
    assert "colour=blue" in schema.feature_names and "flag=False" in schema.feature_names


def test_labels_and_one_hot_values_share_one_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Numbers numerically, then text: for labels, for one-hot values and for any list of
    label names (a federation's label set)."""
    assert label_order(["10", "b", "9", "a", "-1", "9"]) == ["-1", "9", "10", "a", "b"]
    path = tmp_path / "t.csv"
    rows = [(v, lab) for v, lab in zip(["10", "9", "a"] * 4, [10, 9, 2] * 4, strict=True)]
    path.write_text("c,x,y\n" + "".join(f"{c},{i},{lab}\n" for i, (c, lab) in enumerate(rows)))
    d = read_table(path, test_fraction=0.5)
    assert d["classes"] == ("2", "9", "10") == tuple(label_order(d["classes"]))
    assert d["feature_names"] == ("c=9", "c=10", "c=a", "x")


@pytest.mark.parametrize(
    ("cells", "needle"),
    [
        (
            "1,red,,k",
            r"1 missing values in numeric columns 'b'.*missing: impute.*fill or drop",
        ),
        ("1,red,inf,k", r"'b' holds 1 infinite values \(or values too large for float32\)"),
        ("1,red,2020-01-01,k", r"'b' holds text, and it is numeric in the public set"),
    ],
)
def test_a_site_table_gets_the_same_refusals_as_a_dataset(tmp_path, public, cells, needle) -> None:  # type: ignore[no-untyped-def]
    _, schema = public
    site = tmp_path / "site.csv"
    site.write_text("a,colour,b,y\n" + f"{cells}\n" + "".join(f"{i},red,{i},k\n" for i in range(6)))
    with pytest.raises(DatasetFormatError, match=needle):
        read_site_table(site, schema)


def test_u_with_an_empty_column_or_an_id_column_is_refused_as_a_dataset_is(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "public.csv"
    path.write_text("a,b\n" + "".join(f"{i},\n" for i in range(5)))
    with pytest.raises(DatasetFormatError, match="'b' has no values at all"):
        read_public_table(path, missing="impute")
    path.write_text("a,id\n" + "".join(f"{i},n{i:03d}\n" for i in range(60)))
    with pytest.raises(DatasetFormatError, match="'id' has 60 distinct values"):
        read_public_table(path)


def test_no_data_module_imports_a_private_name_of_another() -> None:
    """The table rules live in one place: no module of cosmosfl.data reaches into another's
    private helpers (as schema.py once did into tabular.py)."""
    import ast

    import cosmosfl.data

    offenders = []
    for path in sorted(Path(cosmosfl.data.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cosmosfl"):
                offenders += [
                    f"{path.name}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and a.name != "__version__"
                ]
    assert not offenders
