"""Local training (algorithms/local.py): the client model alone, nothing on the wire."""

from cosmosfl import Local, simulate

from .test_cosmos import small_federation


def test_local_algorithm_reports_client_model_only():
    clients, public_x, _ = small_federation()
    result = simulate(Local(pretrain_epochs=2, local_epochs=1), clients, public_x, rounds=2, seed=0)
    rec = result.records[-1]
    assert set(rec["accuracy"]) == {"client_model"}
    assert set(rec["bytes_up"].values()) == {0} and set(rec["bytes_down"].values()) == {0}
    assert result.clusters is None
