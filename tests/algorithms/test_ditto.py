"""Ditto (algorithms/ditto.py): λ = 0 is local training, and `lam`, the deprecated name of
prox_weight."""

import numpy as np
import pytest

from cosmosfl.algorithms import Ditto, Local
from cosmosfl.engines import InProcessEngine

from .test_parameter_baselines import FAST, run


def personal_weights(clients):
    return [c.learner.get_weights() for c in clients]


def test_ditto_with_lambda_zero_is_local_training():
    ditto, _, ditto_clients = run(Ditto(prox_weight=0.0, **FAST), engine_cls=InProcessEngine)
    local, _, local_clients = run(
        Local(pretrain_epochs=1, local_epochs=1), engine_cls=InProcessEngine
    )
    for rnd in (0, 1):
        assert (
            ditto.records[rnd]["accuracy"]["personal_model"]
            == (local.records[rnd]["accuracy"]["client_model"])
        )
    for a, b in zip(personal_weights(ditto_clients), personal_weights(local_clients), strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    # With λ > 0 the global model does pull the personal models: the comparison can fail.
    _, _, pulled_clients = run(Ditto(prox_weight=1.0, **FAST), engine_cls=InProcessEngine)
    differs = [
        not np.array_equal(a[n], b[n])
        for a, b in zip(
            personal_weights(pulled_clients), personal_weights(local_clients), strict=True
        )
        for n in a
    ]
    assert any(differs)


def test_dittos_lam_is_a_deprecated_name_of_prox_weight(tmp_path, capsys):
    from cosmosfl.cli.main import main
    from cosmosfl.experiment.config import ConfigError, config_from_dict

    with pytest.warns(DeprecationWarning, match=r"Ditto\(lam=\.\.\.\) is deprecated"):
        ditto = Ditto(lam=0.5)
    assert ditto.prox_weight == 0.5 and "lam" not in ditto.hyperparameters()
    with pytest.warns(DeprecationWarning, match=r"Ditto\.lam is deprecated; use prox_weight"):
        assert ditto.lam == 0.5
    with pytest.warns(DeprecationWarning, match=r"algorithm\.lam of ditto is deprecated"):
        cfg = config_from_dict({"algorithm": {"name": "ditto", "lam": 0.5}})
    assert (
        cfg.algorithm
        == config_from_dict({"algorithm": {"name": "ditto", "prox_weight": 0.5}}).algorithm
    )
    with pytest.raises(ConfigError, match=r"one setting of ditto.*set only algorithm\.prox_weight"):
        config_from_dict({"algorithm": {"name": "ditto", "lam": 0.5, "prox_weight": 1.0}})
    # The command line says so in one line, and the resolved config has the new name only.
    assert main(["show-config", "algorithm.name=ditto", "algorithm.lam=0.5"]) == 0
    out, err = capsys.readouterr()
    assert err == (
        "cosmosfl: warning: algorithm.lam of ditto is deprecated; use algorithm.prox_weight "
        "(same meaning)\n"
    )
    assert "prox_weight: 0.5" in out and "lam:" not in out
