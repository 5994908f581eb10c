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
