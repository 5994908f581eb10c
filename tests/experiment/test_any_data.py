"""COSMOS end to end on data that is not a named image set: a CSV table (string labels, a
categorical column, missing values), a folder of images, and the real satellite.csv — with no
model arguments, the defaults following the data's kind."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cosmosfl.data import load_dataset
from cosmosfl.experiment import run_experiment
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import ConfigError, load_config

SHORT = [
    "rounds=2",
    "data.num_clients=6",
    "data.num_groups=3",
    "algorithm.pretrain_epochs=2",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=2",
    "algorithm.distill_epochs=1",
    "algorithm.target_clusters=3",
]


def _write_table(path, rows=480, seed=0, missing=False):
    import pandas as pd

    rng = np.random.default_rng(seed)
    labels = np.array(["oak", "pine", "elm", "ash", "fir", "yew"])
    y = rng.integers(0, 6, rows)
    x = rng.normal(size=(rows, 5)) + 3 * np.eye(6, 5)[y] * 10.0  # separable, in odd units
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)])
    frame["soil"] = np.where(y % 2 == 0, "clay", "sand")
    if missing:
        frame.loc[::17, "f1"] = np.nan
    frame["species"] = labels[y]
    frame.to_csv(path, index=False)


def test_csv_table_runs_cosmos_with_no_model_arguments(tmp_path) -> None:
    _write_table(tmp_path / "trees.csv", missing=True)
    cfg = load_config(
        None, [f"data.dataset={tmp_path / 'trees.csv'}", "data.missing=impute", *SHORT]
    )
    exp = build_experiment(cfg)
    assert exp.dataset.kind == "vectors"
    assert exp.dataset.classes == ("ash", "elm", "fir", "oak", "pine", "yew")
    # Five numeric columns and the two-valued categorical one, one-hot.
    assert exp.public_x.shape[1] == 7
    # Scaled with U's statistics: U itself is centred and unit-variance per feature.
    assert np.allclose(exp.public_x.mean(axis=0), 0, atol=1e-4)
    assert np.isfinite(exp.public_x).all()  # missing values imputed with U's mean
    assert exp.algorithm.server_learner((7,), 6, 0).model(  # the server model takes vectors
        __import__("torch").zeros(2, 7)
    ).shape == (2, 6)
    result = run_experiment(cfg, progress=False)
    assert set(result.records[-1]["accuracy"]) >= {"local", "cluster_model", "client_model"}
    assert result.mean_accuracy() > 0.5  # the classes are separable: well above chance (1/6)


def test_missing_values_are_refused_by_default_naming_the_rule(tmp_path) -> None:
    _write_table(tmp_path / "gaps.csv", missing=True)
    cfg = load_config(None, [f"data.dataset={tmp_path / 'gaps.csv'}", *SHORT])
    with pytest.raises(ValueError, match=r"f1.*data.missing"):
        build_experiment(cfg)


def test_image_folder_runs_cosmos_end_to_end(tmp_path) -> None:
    rng = np.random.default_rng(0)
    root = tmp_path / "shapes"
    for c, name in enumerate(["bars", "dots", "rings"]):
        (root / name).mkdir(parents=True)
        for i in range(40):
            pixels = rng.integers(0, 60, (12, 12), dtype=np.uint8)
            pixels[:, c * 4 : c * 4 + 4] = 250  # a class-specific stripe
            Image.fromarray(pixels, mode="L").save(root / name / f"{i}.png")
    ds = load_dataset(root, image_size=8)
    assert ds.kind == "images" and ds.x_train.shape[1:] == (8, 8, 1)
    cfg = load_config(
        None,
        [
            f"data.dataset={root}",
            "data.image_size=8",
            "data.partition=iid",
            "algorithm.target_clusters=2",
            *[o for o in SHORT if "groups" not in o and "target" not in o],
        ],
    )
    result = run_experiment(cfg, progress=False)
    assert result.mean_accuracy("local") > 0.5  # three classes: above chance


def test_misspelt_dataset_name_fails_at_config_load() -> None:
    with pytest.raises(ConfigError, match=r"data.dataset = 'fmnist'.*fashion_mnist"):
        load_config(None, ["data.dataset=fmnist"])


SHARED = Path(
    os.environ.get("COSMOSFL_DATA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


@pytest.mark.data
def test_satellite_csv_runs_from_the_command_line(tmp_path, request) -> None:
    if not (SHARED / "satellite.csv").is_file():
        pytest.skip(f"satellite.csv not found in {SHARED}: the real data folder is absent")
    out = tmp_path / "sat"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cosmosfl.cli.main",
            "run",
            "--data-dir",
            str(SHARED),
            "data.dataset=satellite.csv",
            "--out",
            str(out),
            "rounds=1",
            "algorithm.pretrain_epochs=1",
            "algorithm.server_epochs=1",
            "algorithm.distill_epochs=1",
        ],
        cwd=request.config.rootpath,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cosmos on satellite" in proc.stdout
    assert (out / "summary.json").is_file()


def test_tabular_run_with_refit_learners_resumes_exactly(tmp_path) -> None:
    """Refit learners remember their distilled targets: a resumed run must restore them."""
    from cosmosfl.engines.progress import Reporter
    from cosmosfl.experiment.runner import resume_experiment

    class StopBefore(Reporter):
        def round_start(self, round_num, rounds):
            if round_num == 3:
                raise KeyboardInterrupt

    _write_table(tmp_path / "trees.csv")
    models = "clients.models={mlp: 1, logistic_regression: 1, hist_gradient_boosting: 1}"
    cfg = load_config(
        None,
        [
            f"data.dataset={tmp_path / 'trees.csv'}",
            models,
            "algorithm.name=comet",
            "algorithm.distill_epochs=1",
            "algorithm.pretrain_epochs=1",
            "algorithm.local_epochs=1",
            "rounds=3",
            "threads=1",
            "data.num_clients=6",
            "data.num_groups=3",
        ],
    )
    whole = run_experiment(cfg, tmp_path / "whole", progress=False)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, tmp_path / "cut", progress=StopBefore())
    resumed = resume_experiment(tmp_path / "cut", progress=False)

    def computed(records):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in records]

    assert computed(resumed.records) == computed(whole.records)
    # The scikit-learn clients' own accuracy moves between rounds: what they distil is kept
    # (refitting on private data alone, it would read the same every round).
    from cosmosfl.experiment.build import client_model_names

    names = client_model_names(cfg.clients.models, 6)
    refit = [str(i) for i, n in enumerate(names) if n != "mlp"]
    local = [[r["accuracy"]["local"][c] for c in refit] for r in whole.records]
    assert local[0] != local[1] or local[1] != local[2]
