"""Every model-agnostic algorithm survives drop-outs, stragglers, crashes and corrupted
payloads; a corrupted reply has exactly the effect of that client dropping out of it."""

import pytest
import torch

from cosmosfl.algorithms import Comet, Cosmos, FedCT, FedMD, Local
from cosmosfl.core import protocol
from cosmosfl.engines import InProcessEngine
from cosmosfl.experiment import SimulationResult
from cosmosfl.experiment.server_models import torch_server_learner

from .test_baselines import digits_federation

FAST = {"pretrain_epochs": 2, "local_epochs": 1}
ALGORITHMS = {
    "cosmos": lambda **settings: Cosmos(
        **FAST,
        server_epochs=1,
        distill_epochs=1,
        server_lr=1e-3,
        server_model="mlp",
        server_learner=torch_server_learner("mlp", distill_lr=1e-3),
        **settings,
    ),
    "fedmd": lambda: FedMD(**FAST, distill_epochs=1),
    "fedct": lambda: FedCT(**FAST),
    "comet": lambda: Comet(**FAST, distill_epochs=1),
    "local": lambda: Local(**FAST),
}


def run(name, rounds=3, seed=0, **faults):
    clients, public_x, _ = digits_federation()
    engine = InProcessEngine(clients, public_x, seed=seed, faults=faults, min_participation=0.3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        algo = ALGORITHMS[name]()
        return SimulationResult(algo.name, algo.primary_model, engine.run(algo, rounds))


def outcome(result):
    """What a run computed: accuracies and clusters (not timing, bytes or the fault log)."""
    keep = ("accuracy", "clusters", "K", "threshold", "updated_clusters", "consensus_agreement")
    return [{k: r[k] for k in keep if k in r} for r in result.records]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_algorithm_completes_under_mixed_faults(name):
    result = run(name, dropout=0.15, straggler=0.1, crash=0.1, corrupt=0.1)
    faults = [f for r in result.records for f in r["faults"]]
    assert {f["fault"] for f in faults} == {"dropout", "straggler", "crash", "corrupt"}
    for rec in result.records:  # evaluation is never faulted: every client is measured
        assert len(rec["accuracy"]["client_model"]) == 10
        for rejected in rec["rejected"]:
            assert {"client", "task", "reason"} <= set(rejected)
    if name != "local":  # local sends no payload that could be corrupted
        assert any(r["rejected"] for r in result.records)


@pytest.mark.parametrize("name", ["cosmos", "fedmd", "fedct", "comet"])
def test_corrupted_replies_equal_dropping_out_of_them(name):
    corrupt = run(name, corrupt=0.1, corruption="random")
    dropout = run(name, dropout=0.1, tasks=[protocol.PREDICT_PUBLIC])
    hit = [
        (r["round"], f["client"]) for r in corrupt.records for f in r["faults"]
        if f["task"] == protocol.PREDICT_PUBLIC
    ]  # fmt: skip
    assert hit, "the seed must fault someone for the comparison to mean anything"
    assert hit == [
        (r["round"], f["client"]) for r in dropout.records for f in r["faults"]
    ]  # the same clients in the same rounds
    rejected = [(r["round"], x["client"]) for r in corrupt.records for x in r["rejected"]]
    assert rejected == hit  # every corrupted reply was rejected, nothing else
    assert outcome(corrupt) == outcome(dropout)


def _cosmos_engine(fault):
    clients, public_x, part = digits_federation()
    engine = InProcessEngine(clients, public_x, seed=0, faults={"dropout": 0.5})
    engine.faults.fault = fault
    return engine, part


@pytest.mark.parametrize("name", ["cosmos", "comet"])
def test_client_offline_in_round_1_gets_the_pretraining_it_missed(name):
    engine, _ = _cosmos_engine(lambda r, c, t: "dropout" if r == 1 and c == 3 else None)
    epochs = {}
    for client in engine._clients.values():
        original = client.handle

        def handle(message, _orig=original, _cid=client.id):
            if message.task == protocol.TRAIN_LOCAL:
                epochs[(engine._round, _cid)] = message.config["epochs"]
            return _orig(message)

        client.handle = handle
    algo = ALGORITHMS[name]()
    with torch.random.fork_rng(devices=[]):
        for t in (1, 2, 3):
            engine.run_round(algo, t, 3)
    e0, e = FAST["pretrain_epochs"], FAST["local_epochs"]
    assert (1, 3) not in epochs and epochs[(1, 4)] == e0
    assert epochs[(2, 3)] == e0 and epochs[(2, 4)] == e  # E0 when it first answers
    assert epochs[(3, 3)] == e
    # Its state survives a checkpoint: a restored algorithm knows who has pre-trained.
    restored = ALGORITHMS[name]()
    restored.set_state(algo.get_state())
    assert restored.pretrained == set(range(10))
