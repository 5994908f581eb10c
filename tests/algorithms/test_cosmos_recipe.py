"""COSMOS's two recipes end to end: `validated` records what it decided and reports what each
client deploys; `paper` records section 4 as before, with nothing of the gate."""

import pytest

from cosmosfl import Cosmos
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.runner import run_experiment

FAST = [
    "rounds=2",
    "clients.models={mlp: 0.7, logistic_regression: 0.3}",
    "algorithm.pretrain_epochs=5",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=2",
    "algorithm.distill_epochs=1",
    "algorithm.server_max_epochs=6",
    "data.validation_fraction=0.2",
]


@pytest.fixture(scope="module")
def runs():
    out = {}
    for recipe in ("validated", "paper"):
        cfg = load_config("configs/default.yaml", [*FAST, f"algorithm.recipe={recipe}"])
        out[recipe] = run_experiment(cfg, progress=False)
    cfg = load_config("configs/default.yaml", [*FAST, "algorithm.recipe=validated",
                                               "algorithm.deploy=mix"])  # fmt: skip
    out["mix"] = run_experiment(cfg, progress=False)
    return out


def test_deploy_mix_records_each_clients_alpha_and_alpha_1_is_its_own_model(runs):
    mix, own = runs["mix"], runs["validated"]
    for ours, theirs in zip(mix.records, own.records, strict=True):
        # Everything up to what a client deploys is the same run.
        assert ours["accuracy"]["client_model"] == theirs["accuracy"]["client_model"]
        alphas = ours["deployed_mix"]
        assert set(alphas) == set(ours["accuracy"]["deployed"])
        for cid, a in alphas.items():
            assert 0.0 <= a["alpha"] <= 1.0
            if a["alpha"] == 1.0:
                assert ours["accuracy"]["deployed"][cid] == ours["accuracy"]["client_model"][cid]
    # The mix sends h_π(i)'s predictions on each client's rows: more bytes down than "own".
    assert sum(mix.records[-1]["bytes_down"].values()) > sum(own.records[-1]["bytes_down"].values())


def test_validated_records_server_fidelity_and_every_gate_decision(runs):
    result = runs["validated"]
    assert result.reported_model == "deployed"
    for record in result.records:
        clusters = set(record["clusters"].values())
        fidelity = record["server_fidelity"]
        assert {int(k) for k in fidelity} == clusters
        for stats in fidelity.values():
            assert 0.0 <= stats["fidelity_agreement"] <= 1.0 and stats["fidelity_kl"] >= 0
            assert 1 <= stats["epochs"] <= 6
        gates = record["client_distill"]
        assert set(gates) == set(record["accuracy"]["deployed"])
        for g in gates.values():
            assert g["gate_kept"] in (0.0, 1.0)
            if g["gate_kept"] == 0.0:  # a refused step: the model is the one before it
                assert g["gate_choice"] == -1.0
        # What a client deploys is its own model after the gate.
        assert record["accuracy"]["deployed"] == record["accuracy"]["client_model"]


def test_a_refused_step_leaves_the_client_where_local_training_left_it(runs):
    result = runs["validated"]
    last = result.records[-1]
    for cid, g in last["client_distill"].items():
        if g["gate_kept"] == 0.0:
            assert last["accuracy"]["client_model"][cid] == last["accuracy"]["local"][cid]


def test_paper_recipe_has_no_gate_and_reports_the_cluster_model(runs):
    result = runs["paper"]
    assert result.reported_model == "cluster_model"
    for record in result.records:
        assert "deployed" not in record["accuracy"] and "server_fidelity" not in record
        assert all("gate_kept" not in v for v in record["client_distill"].values())


def test_recipe_names_are_checked_and_the_resolved_settings_follow_the_recipe():
    with pytest.raises(ValueError, match="recipe"):
        Cosmos(recipe="best")
    paper, validated = Cosmos(recipe="paper"), Cosmos()
    assert (paper.server_training_used, paper.client_gate_used, paper.server_lr_used) == (
        "fixed",
        False,
        1e-4,
    )
    assert (validated.server_training_used, validated.client_gate_used) == ("fidelity", True)
    assert Cosmos(recipe="paper", client_gate="validation").client_gate_used is True
    assert Cosmos(client_gate="none").client_gate_used is False
