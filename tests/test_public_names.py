"""The names users import keep resolving where they were importable, after modules moved
(reports up to cosmosfl.reporting, the config schema, the centralized reference's settings)."""

import importlib

import pytest

import cosmosfl
import cosmosfl.experiment
import cosmosfl.reporting


@pytest.mark.parametrize("facade", [cosmosfl, cosmosfl.experiment, cosmosfl.reporting])
def test_every_lazily_exported_name_resolves(facade) -> None:
    for name in facade.__all__:
        assert getattr(facade, name) is not None, name


def test_the_experiment_facade_still_gives_the_report_writer() -> None:
    new = importlib.import_module("cosmosfl.reporting.report")
    assert cosmosfl.experiment.write_report is new.write_report


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("cosmosfl.client", ["Client", "label_prior_weights"]),
        ("cosmosfl.experiment.build", ["Experiment", "build_experiment", "make_learner"]),
        ("cosmosfl.experiment.centralized", ["Centralized", "REFERENCE_RUNS", "run_centralized"]),
        ("cosmosfl.experiment.config", ["ConfigError", "ExperimentConfig", "identity"]),
        ("cosmosfl.experiment.compare", ["known_names", "plan_compare", "run_compare"]),
        ("cosmosfl.experiment.sweep", ["GridAxis", "parse_grid", "plan_sweep", "read_sweep"]),
        ("cosmosfl.reporting.runset", ["algorithm_order", "display_name", "load_runs", "role"]),
    ],
)
def test_names_stay_importable_from_their_old_modules(module, names) -> None:
    loaded = importlib.import_module(module)
    for name in names:
        assert getattr(loaded, name) is not None, f"{module}.{name}"


def test_renamed_classes_keep_their_old_names():
    # RunResult was SimulationResult until 0.3. InProcessEngine's old name, SimulationEngine,
    # is gone (CHANGELOG): it read as Flower's simulation runtime.
    import cosmosfl
    import cosmosfl.engines
    from cosmosfl.experiment.result import RunResult, SimulationResult

    assert SimulationResult is RunResult
    assert cosmosfl.SimulationResult is cosmosfl.RunResult
    assert not hasattr(cosmosfl.engines, "SimulationEngine")
