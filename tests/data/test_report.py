"""Partition reports: the label table adds up and the plot is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cosmosfl.data import (
    dirichlet_split,
    label_summary,
    label_table,
    paper_split,
    plot_label_distribution,
    write_label_csv,
)

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


# -- many classes: Tiny ImageNet's shape -------------------------------------------------------
M200 = 200
Y200_TRAIN = np.random.default_rng(2).permutation(np.repeat(np.arange(M200), 25))
Y200_TEST = np.repeat(np.arange(M200), 5)
NAMES200 = [f"n0{1440000 + 37 * c:07d}" for c in range(M200)]  # WordNet-id-like names


def test_summary_of_200_classes_fits_and_adds_up() -> None:
    p = paper_split(Y200_TRAIN, Y200_TEST, 10, seed=0)
    assert max(map(len, label_table(p, Y200_TRAIN, M200, NAMES200).splitlines())) > 1000
    summary = label_summary(p, Y200_TRAIN, M200, NAMES200, width=120)
    lines = summary.splitlines()
    assert max(map(len, lines)) <= 120
    assert lines[0].split()[:5] == ["client", "group", "n_train", "n_test", "classes"]
    rows = _rows(summary)
    assert set(rows) == {*(str(i) for i in range(10)), "public"}
    counts = p.label_counts(Y200_TRAIN, M200)
    for i in range(10):
        row = rows[str(i)]
        assert int(row[2]) == len(p.client_train[i]) and int(row[3]) == len(p.client_test[i])
        assert int(row[4]) == int((counts[i] > 0).sum())
        largest = int(np.argmax(counts[i]))  # ties: the lowest class id, as the summary does
        share = 100 * counts[i, largest] / counts[i].sum()
        assert row[5] == NAMES200[largest] and row[6].rstrip(",") == f"{share:.1f}%"
    assert rows["public"][4] == "200"
    assert len(label_summary(p, Y200_TRAIN, M200, width=60).splitlines()[2]) <= 60


def test_csv_holds_the_full_matrix(tmp_path: Path) -> None:
    import csv

    p = paper_split(Y200_TRAIN, Y200_TEST, 10, seed=0)
    out = write_label_csv(p, Y200_TRAIN, M200, tmp_path / "labels.csv", NAMES200)
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["client", "group", "n_train", "n_test", *NAMES200]
    assert [r[0] for r in rows[1:]] == [*(str(i) for i in range(10)), "public"]
    matrix = np.array([r[4:] for r in rows[1:]], dtype=int)
    assert np.array_equal(matrix[:10], p.label_counts(Y200_TRAIN, M200))
    assert np.array_equal(matrix.sum(axis=0), np.bincount(Y200_TRAIN))
