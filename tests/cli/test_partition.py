"""`cosmosfl partition` (cli/partition.py): the label table of 200 classes fits the terminal."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.test_report import NAMES200, Y200_TEST, Y200_TRAIN


def test_cli_partition_of_200_classes_fits_120_columns(tmp_path: Path) -> None:
    """`cosmosfl partition` end to end on a synthetic 200-class .npz (no real data needed)."""
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    npz = tmp_path / "tiny200.npz"
    np.savez(
        npz,
        x_train=rng.integers(0, 255, (len(Y200_TRAIN), 8, 8, 3), dtype=np.uint8),
        y_train=Y200_TRAIN.astype(np.int64),
        x_test=rng.integers(0, 255, (len(Y200_TEST), 8, 8, 3), dtype=np.uint8),
        y_test=Y200_TEST.astype(np.int64),
        classes=np.array(NAMES200),
    )
    command = ["partition", f"data.dataset={npz}", "--csv", str(tmp_path / "m.csv")]
    proc = subprocess.run(
        [sys.executable, "-m", "cosmosfl.cli.main", *command],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 120
    assert "200 classes" in lines[0] and "--csv" in proc.stdout
    assert any(line.startswith("public ") for line in lines)
    assert (tmp_path / "m.csv").read_text().count("\n") == 12  # header, 10 clients, U
