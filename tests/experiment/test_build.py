"""Building an experiment from its config (experiment/build.py): the checks on the clients an
algorithm accepts, the server models' settings, the validation slice and the client mix."""

import numpy as np
import pytest

from cosmosfl.experiment.build import build_experiment, client_model_names, validation_holdout
from cosmosfl.experiment.config import load_config


def test_config_with_mixed_architectures_is_rejected_before_training():
    from cosmosfl.experiment.build import check_clients
    from cosmosfl.experiment.config import ConfigError, config_from_dict

    for models in ({"mlp": 0.5, "cnn": 0.5}, {"logistic_regression": 1.0}):
        cfg = config_from_dict({"clients": {"models": models}, "algorithm": {"name": "ditto"}})
        with pytest.raises(ConfigError, match="algorithm ditto exchanges model parameters"):
            check_clients(cfg)
    ok = config_from_dict({"clients": {"models": {"cnn": 1.0}}, "algorithm": {"name": "ditto"}})
    assert set(check_clients(ok)) == {"cnn"}
    # Model-agnostic algorithms keep accepting mixed federations.
    mixed = config_from_dict({"clients": {"models": {"mlp": 0.5, "cnn": 0.5}}})
    assert set(check_clients(mixed)) == {"mlp", "cnn"}


def test_server_models_take_the_clients_training_settings():
    overrides = [
        "clients.precision=bf16",
        "clients.consistency_samples=3",
        "clients.consistency_target=detached",
        "clients.neighbour_bn=frozen",
        "clients.eval_batch_size=77",
        "algorithm.server_head_init=default",
    ]
    from cosmosfl.experiment.build import build_experiment

    exp = build_experiment(load_config("configs/default.yaml", overrides))
    h = exp.algorithm.server_learner((1, 8, 8), 10, 0)
    assert (h.precision, h.consistency_samples, h.consistency_target) == ("bf16", 3, "detached")
    assert (h.neighbour_bn, h.eval_batch_size) == ("frozen", 77)
    assert h.distill_lr == exp.config.algorithm["server_lr"]


def test_validation_holdout_is_a_seeded_disjoint_split():
    idx = np.arange(100, 150)
    tr, va = validation_holdout(idx, 0.2, seed=7)
    assert len(va) == 10 and len(tr) == 40
    assert sorted(np.concatenate([tr, va]).tolist()) == idx.tolist()
    again = validation_holdout(idx, 0.2, seed=7)
    assert np.array_equal(va, again[1]) and not np.array_equal(
        va, validation_holdout(idx, 0.2, 8)[1]
    )
    assert len(validation_holdout(idx, 0.0, 1)[1]) == 0
    assert len(validation_holdout(idx[:3], 0.01, 1)[1]) == 1  # at least one sample ...
    assert len(validation_holdout(idx[:2], 0.9, 1)[0]) == 1  # ... and never all of them


def test_experiment_holds_the_slice_out_of_training_for_every_algorithm():
    base = load_config(None, ["data.num_clients=4", "data.num_groups=2", "algorithm.name=local",
                              "data.validation_fraction=0"])  # fmt: skip
    held = load_config(None, ["data.num_clients=4", "data.num_groups=2", "algorithm.name=local",
                              "data.validation_fraction=0.25"])  # fmt: skip
    full, split = build_experiment(base).clients, build_experiment(held).clients
    for a, b in zip(full, split, strict=True):
        assert a.validation is None and b.validation is not None
        assert len(b.train[1]) + len(b.validation[1]) == len(a.train[1])
        assert np.array_equal(a.test[1], b.test[1])
        rows = {r.tobytes() for r in b.train[0]}
        assert not any(r.tobytes() in rows for r in b.validation[0])


def test_client_mix_is_spread_over_ids_not_blocked():
    names = client_model_names({"a": 0.5, "b": 0.5}, 10)
    assert names.count("a") == 5 and names.count("b") == 5
    # Consecutive ids share a class group in the paper split: neighbours must differ.
    assert all(names[i] != names[i + 1] for i in range(9))
    names = client_model_names({"a": 0.5, "b": 0.3, "c": 0.2}, 10)
    assert [names.count(x) for x in "abc"] == [5, 3, 2]
    assert client_model_names(["x", "y"], 2) == ["x", "y"]
    odd = client_model_names({"a": 1, "b": 1, "c": 1}, 10)  # counts by largest remainder
    assert sorted(odd.count(x) for x in "abc") == [3, 3, 4]
