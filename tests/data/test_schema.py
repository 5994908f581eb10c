"""U fixes the feature layout of every site's table (data/schema.py, read by data/tabular.py)."""

from __future__ import annotations

import numpy as np
import pytest

from cosmosfl.data.errors import DatasetFormatError
from cosmosfl.data.tabular import read_public_table, read_site_table

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
