"""A run that relies on a changed default says so in its header; one that names it does not."""

import pytest

from cosmosfl.engines.progress import SilentReporter
from cosmosfl.experiment.config import config_from_dict
from cosmosfl.experiment.runner import run_experiment

TINY = {
    "rounds": 1,
    "workers": 1,
    "threads": 1,
    "data": {"dataset": "digits", "num_clients": 4, "num_groups": 2},
    "clients": {"models": {"logistic_regression": 1.0}},
}
EPOCHS = {"pretrain_epochs": 1, "server_epochs": 1, "distill_epochs": 1, "server_model": "mlp"}


@pytest.mark.parametrize(("clustering", "noted"), [(None, True), ("greedy", False)])
def test_run_header_notes_the_changed_clustering_default_once(clustering, noted):
    algorithm = {"name": "cosmos", **EPOCHS}
    if clustering is not None:
        algorithm["clustering"] = clustering
    reporter = SilentReporter()
    run_experiment(config_from_dict({**TINY, "algorithm": algorithm}), progress=reporter)
    notes = [line for line in reporter.lines if line.startswith("note:")]
    assert len(notes) == (1 if noted else 0)
    if noted:
        assert "algorithm.clustering: greedy" in notes[0]


@pytest.mark.parametrize(
    ("overrides", "noted"),
    [([], True), (["cosmos.clustering=greedy"], False), (["algorithm.clustering=greedy"], False)],
)
def test_compare_notes_the_changed_default_once_for_all_its_runs(tmp_path, overrides, noted):
    from cosmosfl.experiment.compare import plan_compare

    base = {**TINY, "algorithm": {"name": "cosmos", **EPOCHS}}
    plan = plan_compare(base, ["cosmos", "local"], [1, 2], tmp_path, overrides)
    notes = [line for line in plan.describe() if line.strip().startswith("note:")]
    assert len(notes) == (1 if noted else 0)
    assert all(run.config.notices == [] for run in plan.runs)  # not once per run
