"""COMET (algorithms/comet.py) on digits: it recovers the class groups and caps K."""

from cosmosfl.algorithms import Comet
from cosmosfl.engines import InProcessEngine
from cosmosfl.experiment import SimulationResult

from .test_baselines import digits_federation


def test_comet_recovers_the_five_class_groups(runs):
    result, _, _, part = runs["comet"]
    for rec in result.records:  # re-clustered every round
        assert rec["K"] == 5 and rec["threshold"] is None
        found = {int(c): k for c, k in rec["clusters"].items()}
        truth = {i: int(g) for i, g in enumerate(part.client_group)}
        # The same partition of clients (cluster numbers may differ from group numbers).
        pairs = {(found[c], truth[c]) for c in truth}
        assert len(pairs) == 5, sorted(pairs)
        # Clusters are numbered by their smallest member: 2 consecutive ids per group.
        assert [found[c] for c in range(10)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert set(result.records[-1]["accuracy"]) == {"local", "client_model"}
    assert result.clusters is not None


def test_comet_caps_k_at_the_number_of_clients():
    clients, public_x, _ = digits_federation(num_clients=5)
    engine = InProcessEngine(clients[:3], public_x, seed=0)
    algo = Comet(num_clusters=5, pretrain_epochs=1, distill_epochs=1)
    rec = SimulationResult(algo.name, algo.primary_model, engine.run(algo, rounds=1))
    assert rec.records[0]["K"] == 3 and len(set(rec.clusters.values())) == 3
