"""Partition reports: the label table adds up and the plot is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosmosfl.data import dirichlet_split, label_table, paper_split, plot_label_distribution

Y_TRAIN = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 60))
Y_TEST = np.repeat(np.arange(10), 20)


def _rows(table: str) -> dict[str, list[str]]:
    lines = table.splitlines()
    return {line.split()[0]: line.split() for line in lines[2:]}


def test_table_has_a_row_per_client_that_adds_up() -> None:
    p = paper_split(Y_TRAIN, Y_TEST, 7, seed=0)
    table = label_table(p, Y_TRAIN, 10)
    header = table.splitlines()[0].split()
    assert header[:4] == ["client", "group", "n_train", "n_test"] and len(header) == 14
    rows = _rows(table)
    assert set(rows) == {*(str(i) for i in range(7)), "public"}
    for i in range(7):
        row = rows[str(i)]
        counts = np.array(row[4:], dtype=int)
        assert int(row[2]) == counts.sum() == len(p.client_train[i])
        assert np.array_equal(counts, np.bincount(Y_TRAIN[p.client_train[i]], minlength=10))
        assert int(row[1]) == p.client_group[i]
        assert int(row[3]) == len(p.client_test[i])
    public = rows["public"]
    assert int(public[2]) == len(p.public) == np.array(public[4:], dtype=int).sum()
    totals = sum(np.array(rows[r][4:], dtype=int) for r in rows)
    assert np.array_equal(totals, np.bincount(Y_TRAIN))  # every training sample appears once


def test_table_with_class_names_and_no_groups() -> None:
    p = dirichlet_split(Y_TRAIN, Y_TEST, 3, seed=0)
    names = [f"class{i}" for i in range(10)]
    table = label_table(p, Y_TRAIN, 10, class_names=names)
    assert table.splitlines()[0].split()[4:] == names
    assert all(row[1] == "-" for row in _rows(table).values())
    with pytest.raises(ValueError, match="3 names for 10 classes"):
        label_table(p, Y_TRAIN, 10, class_names=["a", "b", "c"])


@pytest.mark.parametrize("num_classes", [10, 30])  # stacked bars, then a heatmap
def test_plot_writes_a_png(tmp_path: Path, num_classes: int) -> None:
    y = np.random.default_rng(1).permutation(np.repeat(np.arange(num_classes), 20))
    p = dirichlet_split(y, y, 6, seed=0)
    out = plot_label_distribution(p, y, num_classes, tmp_path / "plots" / "labels.png")
    assert out == tmp_path / "plots" / "labels.png"
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
