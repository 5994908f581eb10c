"""XGBoostLearner and LightGBMLearner (optional extras), and learner_for_estimator."""

import json
import pickle
import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from cosmosfl.learners import (
    LightGBMLearner,
    SklearnLearner,
    XGBoostLearner,
    learner_for_estimator,
)
from cosmosfl.learners import boosting as boosting_module

LIBRARIES = {XGBoostLearner: "xgboost", LightGBMLearner: "lightgbm"}


@pytest.fixture(params=[XGBoostLearner, LightGBMLearner], ids=["xgboost", "lightgbm"])
def cls(request):
    pytest.importorskip(LIBRARIES[request.param])
    return request.param


def make(cls, **options):
    options = {"num_trees": 20, "params": {"min_data_in_leaf": 2}} | options
    if cls is XGBoostLearner:
        options["params"] = {k: v for k, v in options["params"].items() if k != "min_data_in_leaf"}
    return cls(num_classes=4, **options)


def data(classes=(0, 1), n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.choice(classes, n)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    x[:, 0] += 4 * y
    return x, y.astype(np.int64)


def public(n=40, seed=1):
    x = np.random.default_rng(seed).normal(size=(n, 5)).astype(np.float32)
    x[:, 1] += 6  # away from the private rows: only the targets decide here
    return x


def soft(n, first, second, mass, m=4):
    t = np.zeros((n, m), np.float32)
    t[:, first], t[:, second] = 1 - mass, mass
    return t


def test_fit_learns_and_missing_classes_get_almost_no_mass(cls):
    x, y = data(classes=(1, 3))
    learner = make(cls)
    metrics = learner.fit(x, y)
    p = learner.predict_proba(x)
    assert p.shape == (60, 4) and p.dtype == np.float32 and np.allclose(p.sum(1), 1)
    assert metrics["train_top1"] > 0.9 and learner.evaluate(x, y)["top1"] > 0.9
    assert p[:, [0, 2]].max() < 0.05


def test_soft_mass_moves_predictions_toward_the_second_class(cls):
    x, y = data()
    xu = public()
    second = {}
    for mass in (0.0, 0.4):
        learner = make(cls)
        learner.fit(x, y)
        learner.distill(xu, soft(len(xu), 2, 3, mass))
        p = learner.predict_proba(xu)
        assert p[:, 2].mean() > p[:, 3].mean()
        second[mass] = p[:, 3].mean()
    assert second[0.4] > second[0.0] + 0.1


def test_distilled_targets_survive_the_next_fit(cls):
    x, y = data()
    xu = public()
    alone, taught = make(cls), make(cls)
    alone.fit(x, y)
    alone.fit(x, y)
    taught.fit(x, y)
    taught.distill(xu, soft(len(xu), 2, 3, 0.3))
    taught.fit(x, y)
    assert (taught.predict_proba(xu).argmax(1) == 2).mean() > 0.9
    assert (alone.predict_proba(xu).argmax(1) == 2).mean() < 0.1
    assert taught.evaluate(x, y)["top1"] > 0.9


def test_same_seed_same_predictions_and_checkpoints_resume_identically(cls):
    x, y = data()
    xu = public()
    a, b = make(cls, seed=3), make(cls, seed=3)
    for learner in (a, b):
        learner.fit(x, y)
        learner.distill(xu, soft(len(xu), 2, 3, 0.3))
    assert np.array_equal(a.predict_proba(xu), b.predict_proba(xu))
    state = pickle.loads(pickle.dumps(a.get_state()))
    # Boosters are saved in their own format, with the starting scores of the soft objective.
    assert isinstance(state["model"]["booster"], bytes | str)
    assert len(state["model"]["base"]) == 4
    resumed = make(cls, seed=3)
    resumed.set_state(state)
    assert np.array_equal(resumed.predict_proba(xu), a.predict_proba(xu))
    a.fit(x, y)
    resumed.fit(x, y)  # the remembered targets came with the state
    assert np.array_equal(resumed.predict_proba(xu), a.predict_proba(xu))
    assert (resumed.predict_proba(xu).argmax(1) == 2).mean() > 0.9


def test_continue_boosting_adds_trees_per_call_and_rebuilds_past_max_trees(cls):
    x, y = data()
    learner = make(cls, num_trees=10, trees_per_call=5, max_trees=20, continue_boosting=True)
    counts = []
    for _ in range(4):
        learner.fit(x, y)
        counts.append(learner._num_rounds(learner._model))
    assert counts == [10, 15, 20, 10]


def test_a_diverged_call_is_retried_with_half_the_learning_rate():
    xgboost = pytest.importorskip("xgboost")

    class Poisoned:  # stands for a booster whose scores blew up
        def predict(self, data):
            return np.full((data.num_row(), 4), np.nan)

    class FirstTryDiverges(XGBoostLearner):
        def _train(self, x, y, w, *, lr_scale, init):
            model = super()._train(x, y, w, lr_scale=lr_scale, init=init)
            return Poisoned() if lr_scale == 1.0 else model

        def _proba(self, model, x):
            return model.predict(xgboost.DMatrix(x))

    x, y = data()
    # The copies route trains through `_train`, which this subclass poisons.
    learner = FirstTryDiverges(
        num_classes=4, num_trees=5, params={"eta": 0.4}, soft_targets="copies"
    )
    with pytest.warns(UserWarning, match="FirstTryDiverges: the refit diverged.*non-finite"):
        metrics = learner.fit(x, y)
    assert metrics["refit_retries"] == 1 and metrics["refit_rejected"] == 0
    config = json.loads(learner._model.save_config())
    eta = config["learner"]["gradient_booster"]["tree_train_param"]["eta"]
    assert float(eta) == pytest.approx(0.2)
    assert learner.evaluate(x, y)["top1"] > 0.9


def test_missing_library_names_the_extra(monkeypatch):
    real = boosting_module.importlib.import_module

    def fake(name, *args):
        if name in ("xgboost", "lightgbm"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args)

    monkeypatch.setattr(boosting_module.importlib, "import_module", fake)
    with pytest.raises(
        ImportError, match=r"XGBoostLearner needs xgboost: pip install 'cosmosfl\[xgboost\]'"
    ):
        XGBoostLearner(num_classes=3)
    with pytest.raises(
        ImportError, match=r"LightGBMLearner needs lightgbm: .*cosmosfl\[lightgbm\]"
    ):
        LightGBMLearner(num_classes=3)


def test_options_are_validated(cls):
    with pytest.raises(ValueError, match="trees_per_call"):
        cls(num_classes=3, trees_per_call=0)
    with pytest.raises(ValueError, match="max_trees"):
        cls(num_classes=3, num_trees=50, max_trees=10)


# -- learner_for_estimator ------------------------------------------------------------------------
def test_xgb_classifier_becomes_an_xgboost_learner_with_its_parameters():
    xgboost = pytest.importorskip("xgboost")
    est = xgboost.XGBClassifier(n_estimators=7, max_depth=3, learning_rate=0.2, random_state=5)
    learner = learner_for_estimator(est, num_classes=4, seed=0)
    assert isinstance(learner, XGBoostLearner)
    assert learner.num_trees == 7 and learner.seed == 5 and learner.threads == 1
    assert learner.params == {"max_depth": 3, "learning_rate": 0.2}
    x, y = data(classes=(0, 3))
    learner.fit(x, y)
    assert learner.evaluate(x, y)["top1"] > 0.9


def test_lgbm_classifier_becomes_a_lightgbm_learner_with_its_parameters():
    lightgbm = pytest.importorskip("lightgbm")
    est = lightgbm.LGBMClassifier(n_estimators=9, num_leaves=7, min_child_samples=3, n_jobs=2)
    learner = learner_for_estimator(est, num_classes=4, seed=11)
    assert isinstance(learner, LightGBMLearner)
    assert learner.num_trees == 9 and learner.seed == 11 and learner.threads == 2
    assert learner.params["num_leaves"] == 7 and learner.params["min_child_samples"] == 3
    assert learner.params["boosting"] == "gbdt" and "n_estimators" not in learner.params
    x, y = data(classes=(0, 3))
    learner.fit(x, y)
    assert learner.evaluate(x, y)["top1"] > 0.9


def test_other_classifiers_become_sklearn_learners_seeded():
    learner = learner_for_estimator(RandomForestClassifier(n_estimators=5), num_classes=3, seed=4)
    assert isinstance(learner, SklearnLearner) and learner.estimator.random_state == 4
    pipe = make_pipeline(StandardScaler(), LogisticRegression(random_state=None))
    learner = learner_for_estimator(pipe, num_classes=3, seed=2)
    assert learner.estimator.get_params()["logisticregression__random_state"] == 2
    assert pipe.get_params()["logisticregression__random_state"] is None  # a clone was seeded
    assert isinstance(learner_for_estimator(LogisticRegression, num_classes=3), SklearnLearner)
    assert learner_for_estimator(learner, num_classes=3) is learner


def test_non_classifiers_are_refused_with_advice():
    with pytest.raises(TypeError, match="not a probabilistic classifier"):
        learner_for_estimator(LinearRegression(), num_classes=3)


def test_lgbm_class_weight_is_not_silently_dropped():
    lightgbm = pytest.importorskip("lightgbm")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        learner_for_estimator(lightgbm.LGBMClassifier(class_weight="balanced"), num_classes=3)
    assert any("class_weight" in str(w.message) for w in caught)
