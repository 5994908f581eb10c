"""The numbers of a report (experiment/stats.py): mean ± SEM over seeds, curves, the † rule."""

import math

import pytest

from cosmosfl.reporting.runset import load_runs
from cosmosfl.reporting.stats import accuracy_rows, curve, intervals_overlap, mean_sem

from .test_report import COSMOS_FINAL, baseline_runs, cosmos_runs, write_run


def test_mean_and_standard_error_over_seeds():
    mean, sem = mean_sem([0.85, 0.80, 0.90])
    assert mean == pytest.approx(0.85) and sem == pytest.approx(0.05 / math.sqrt(3))
    assert mean_sem([0.5]) == (0.5, 0.0)


def test_curves_are_cut_to_the_rounds_every_seed_has(tmp_path):
    cosmos_runs(tmp_path)
    write_run(tmp_path, "fedmd", 1, [{"client_model": (0.2, 0.4)}] * 3)
    write_run(tmp_path, "fedmd", 2, [{"client_model": (0.6, 0.8)}] * 2)
    runset = load_runs(tmp_path)
    fedmd = curve(runset.runs["fedmd"], "client_model")
    assert fedmd.shape == (2, 2) and fedmd.ravel().tolist() == pytest.approx([0.3, 0.3, 0.7, 0.7])
    assert curve(runset.runs["cosmos"], "cluster_model")[:, 0].tolist() == [0.5] * 3


def test_a_row_for_cosmos_reported_model_and_its_client_models(tmp_path):
    cosmos_runs(tmp_path)
    baseline_runs(tmp_path, "local", COSMOS_FINAL)
    rows = accuracy_rows(load_runs(tmp_path))
    assert [(r.algorithm, r.model) for r in rows] == [
        ("cosmos", "cluster_model"),
        ("cosmos", "client_model"),
        ("local", "client_model"),
    ]
    assert rows[0].label[0] == "cluster model h_π(i)"
    assert rows[1].label[0] == "distilled client model f_i^(t,2)"
    assert intervals_overlap(rows[0], rows[0])


def test_no_dagger_with_a_single_seed(tmp_path):
    write_run(tmp_path, "cosmos", 1, [{"cluster_model": (0.9, 0.9)}], reported="cluster_model")
    baseline_runs(tmp_path, "fedmd", {1: (0.1, 0.1)})
    rows = accuracy_rows(load_runs(tmp_path))
    assert rows[0].sem == 0.0 and not rows[0].dagger  # one seed: no interval to compare
