"""`clients.models` names: registry networks, short names, and any class or factory by import
path with keyword arguments, checked when the config is loaded."""

import textwrap

import numpy as np
import pytest

from cosmosfl.experiment.build import client_model_specs, make_learner
from cosmosfl.experiment.config import ConfigError, config_from_dict
from cosmosfl.experiment.model_spec import ModelSpec, parse_models, resolve


def _cfg(models, **data):
    return config_from_dict({"clients": {"models": models}, "data": {"num_clients": 4, **data}})


def test_import_path_with_arguments_and_weight() -> None:
    cfg = _cfg(
        {
            "sklearn.ensemble.HistGradientBoostingClassifier": {"weight": 0.5, "max_iter": 20},
            "mlp": 0.5,
        }
    )
    specs = client_model_specs(cfg.clients.models, 4)
    hgb = [s for s in specs if s.name.startswith("sklearn")]
    assert len(hgb) == 2 and hgb[0].arguments() == {"max_iter": 20}
    built = resolve(hgb[0], {"seed": 7, "num_classes": 3})
    assert built.max_iter == 20 and built.random_state == 7  # seeded from the client's seed


def test_short_names_and_their_defaults_can_be_overridden() -> None:
    (spec,) = parse_models({"knn": {"n_neighbors": 3}})
    assert spec.target == "sklearn.neighbors.KNeighborsClassifier"
    assert resolve(spec, {"seed": 0}).n_neighbors == 3
    (forest,) = parse_models({"random_forest": 1.0})
    assert resolve(forest, {"seed": 5}).n_estimators == 100


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ({"knnn": 1.0}, r"unknown model\(s\) knnn; allowed: .*knn.*import path"),
        ({"sklearn.neighbors.NoSuchThing": 1.0}, "has no 'NoSuchThing'"),
        ({"nosuchpkg.models:build": 1.0}, "cannot be imported"),
        (
            {"sklearn.neighbors.KNeighborsClassifier": {"n_neighbours": 3}},
            "no argument.*n_neighbours",
        ),
        ({"mlp": {"hidden": 3}}, "registry networks take their settings from the clients section"),
        ({"knn": -1}, "positive fractions"),
        (["mlp", {"knn": {"weight": 1}}, "mlp", "mlp"], "weights belong to the mapping form"),
        (["mlp", 3, "mlp", "mlp"], "clients.models = .* must be of type"),
    ],
)
def test_bad_model_names_fail_when_the_config_is_loaded(models, message) -> None:
    with pytest.raises(ConfigError, match=message):
        _cfg(models)


def test_a_users_factory_by_import_path_gets_the_runs_context(tmp_path, monkeypatch) -> None:
    (tmp_path / "site_models.py").write_text(
        textwrap.dedent(
            """
            from torch import nn

            def build(num_classes, in_features, hidden=16):
                return nn.Sequential(
                    nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)
                )
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = _cfg(["site_models:build", {"site_models:build": {"hidden": 4}}, "mlp", "mlp"])
    specs = client_model_specs(cfg.clients.models, 4)

    class Data:  # what make_learner reads of a dataset
        sample_shape = (5,)
        kind = "vectors"
        natural = False

    learner = make_learner(specs[1], cfg, Data(), seed=0, num_classes=3)
    assert learner.model[0].out_features == 4  # the argument from the config
    probs = learner.predict_proba(np.zeros((2, 5), np.float32))
    assert probs.shape == (2, 3)


def test_something_that_is_no_model_is_refused_with_what_is_allowed(monkeypatch) -> None:
    cfg = _cfg({"collections:OrderedDict": 1.0})

    class Data:
        sample_shape = (5,)
        kind = "vectors"
        natural = False

    with pytest.raises(ConfigError, match="not a model cosmosfl can train"):
        make_learner(ModelSpec("collections:OrderedDict"), cfg, Data(), seed=0, num_classes=3)
