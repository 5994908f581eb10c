"""SimulationResult (experiment/result.py): the reported model, and its deprecated old name."""

import pytest

from cosmosfl.experiment import SimulationResult

RECORDS = [{"accuracy": {"cluster_model": {"0": 0.5, "1": 1.0}, "local": {"0": 0.25}}}]


def test_views_use_the_reported_model():
    result = SimulationResult("cosmos", "cluster_model", RECORDS)
    assert result.reported_model == "cluster_model"
    assert result.accuracy() == {0: 0.5, 1: 1.0} and result.mean_accuracy() == 0.75
    assert result.accuracy("local") == {0: 0.25}


def test_primary_model_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match="use reported_model"):
        result = SimulationResult("cosmos", primary_model="cluster_model", records=RECORDS)
    assert result.reported_model == "cluster_model"
    with pytest.warns(DeprecationWarning, match="use reported_model"):
        assert result.primary_model == "cluster_model"
    with pytest.raises(TypeError, match="reported_model"):
        SimulationResult("cosmos")


def test_a_model_the_run_did_not_evaluate_is_a_clear_error_naming_those_it_did():
    from cosmosfl.experiment.result import NotEvaluatedError

    result = SimulationResult("local", "client_model", RECORDS)
    with pytest.raises(NotEvaluatedError) as err:
        result.mean_accuracy("client_model")
    assert str(err.value) == (
        "this run has no 'client_model' accuracies in the last round (algorithm local); "
        "evaluated models: cluster_model, local"
    )
    with pytest.raises(KeyError):  # still a KeyError for code that caught one
        result.accuracy()
    with pytest.raises(IndexError, match="round index 3 is out of range: this run has 1"):
        result.accuracy("local", round_num=3)
    with pytest.raises(IndexError, match="has no rounds"):
        SimulationResult("local", "client_model", []).accuracy()


def test_every_view_gives_int_client_ids():
    records = [
        {**RECORDS[0], "clusters": {"0": 1, "1": 0}, "bytes_up": {"0": 4}, "bytes_down": {"1": 8}}
    ] * 2
    result = SimulationResult("cosmos", "cluster_model", records)
    assert result.clusters == {0: 1, 1: 0}
    assert result.accuracies() == [{0: 0.5, 1: 1.0}] * 2
    assert result.accuracies("local") == [{0: 0.25}] * 2
    assert result.bytes == {"up": [{0: 4}] * 2, "down": [{1: 8}] * 2}
    assert result.models() == ["cluster_model", "local"]
