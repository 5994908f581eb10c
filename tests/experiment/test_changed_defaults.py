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


@pytest.mark.parametrize(
    ("named", "noted"),
    [
        ({}, ["algorithm.recipe: paper", "algorithm.clustering: greedy"]),
        ({"clustering": "greedy"}, ["algorithm.recipe: paper"]),
        ({"recipe": "paper", "clustering": "greedy"}, []),
    ],
)
def test_run_header_notes_each_changed_default_the_config_relies_on_once(named, noted):
    algorithm = {"name": "cosmos", **EPOCHS, **named}
    reporter = SilentReporter()
    run_experiment(config_from_dict({**TINY, "algorithm": algorithm}), progress=reporter)
    notes = [line for line in reporter.lines if line.startswith("note:")]
    assert len(notes) == len(noted)
    for note, key in zip(notes, noted, strict=True):
        assert key in note


@pytest.mark.parametrize(
    ("overrides", "noted"),
    [
        ([], 2),
        (["cosmos.clustering=greedy"], 1),
        (["algorithm.clustering=greedy", "algorithm.recipe=paper"], 0),
    ],
)
def test_compare_notes_the_changed_defaults_once_for_all_its_runs(tmp_path, overrides, noted):
    from cosmosfl.experiment.compare import plan_compare

    base = {**TINY, "algorithm": {"name": "cosmos", **EPOCHS}}
    plan = plan_compare(base, ["cosmos", "local"], [1, 2], tmp_path, overrides)
    notes = [line for line in plan.describe() if line.strip().startswith("note:")]
    assert len(notes) == noted
    assert all(run.config.notices == [] for run in plan.runs)  # not once per run
