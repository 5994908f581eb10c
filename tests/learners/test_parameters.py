"""scikit-learn's parameter discipline on every shipped learner: get_params / set_params /
clone derived from the constructor's signature, constructor arguments stored as given,
parameter_constraints checked before the learner is built, capabilities declared."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import warnings
from typing import ClassVar

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

import cosmosfl
from cosmosfl.core.constraints import Interval
from cosmosfl.learners import (
    Capabilities,
    Learner,
    LightGBMLearner,
    SklearnLearner,
    TorchLearner,
    XGBoostLearner,
)
from cosmosfl.models.registry import build_model_for

M = 3


def _data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, M, n)
    x = (rng.normal(size=(n, 6)) + y[:, None]).astype(np.float32)
    return x, y


def _net(seed: int = 1) -> torch.nn.Module:
    return build_model_for("mlp", (6,), num_classes=M, seed=seed)


def _torch(**kw):
    kwargs = {"num_classes": M, "lr": 2e-3, "batch_size": 16, "seed": 3, **kw}
    return TorchLearner(_net(), **kwargs), kwargs


def _sklearn():
    kwargs = {"num_classes": M, "public_weight": 0.5, "threads": 1}
    return SklearnLearner(LogisticRegression(max_iter=200), **kwargs), kwargs


def _xgboost():
    pytest.importorskip("xgboost")
    kwargs = {"num_classes": M, "params": {"max_depth": 2}, "num_trees": 5, "seed": 3}
    return XGBoostLearner(**kwargs), kwargs


def _lightgbm():
    pytest.importorskip("lightgbm")
    kwargs = {"num_classes": M, "params": {"num_leaves": 4}, "num_trees": 5, "seed": 3}
    return LightGBMLearner(**kwargs), kwargs


def _dpsgd():
    pytest.importorskip("opacus")
    pytest.importorskip("dp_accounting")
    from cosmosfl.privacy.accountant import SiteAccountant
    from cosmosfl.privacy.dpsgd import DPSGDLearner

    inner, _ = _torch()
    kwargs = {"noise_multiplier": 1.1, "max_grad_norm": 0.5}
    return DPSGDLearner(inner, SiteAccountant(None, 1e-5), **kwargs), kwargs


def _subsample_aggregate():
    pytest.importorskip("dp_accounting")
    from cosmosfl.privacy.accountant import SiteAccountant
    from cosmosfl.privacy.aggregate import SubsampleAggregateLearner

    kwargs = {"shards": 2, "noise_multiplier": 2.0, "seed": 5, "student_epochs": 2}
    student, _ = _sklearn()
    u = _data(20, seed=9)[0]
    return SubsampleAggregateLearner(student, u, SiteAccountant(None, 1e-5), **kwargs), kwargs


def _release_recorder():
    from cosmosfl.privacy.audit import ReleaseRecorder

    inner, _ = _sklearn()
    return ReleaseRecorder(inner, _data(20, seed=9)[0]), {}


# One factory per shipped learner class: (learner, the keyword arguments it was given).
FACTORIES = {
    "TorchLearner": _torch,
    "SklearnLearner": _sklearn,
    "XGBoostLearner": _xgboost,
    "LightGBMLearner": _lightgbm,
    "DPSGDLearner": _dpsgd,
    "SubsampleAggregateLearner": _subsample_aggregate,
    "ReleaseRecorder": _release_recorder,
}
# A parameter to change per class: (name, new value, a value its constraints refuse or None).
CHANGES = {
    "TorchLearner": ("lr", 5e-4, 0),
    "SklearnLearner": ("public_weight", 2.0, -1.0),
    "XGBoostLearner": ("num_trees", 7, 0),
    "LightGBMLearner": ("num_trees", 7, 0),
    "DPSGDLearner": ("max_grad_norm", 2.0, 0.0),
    "SubsampleAggregateLearner": ("student_epochs", 3, 0),
    "ReleaseRecorder": ("public_x", _data(10, seed=4)[0], None),
}


def _shipped_learner_classes() -> set[str]:
    """Every concrete Learner subclass defined in the cosmosfl package (modules imported that
    need no missing optional extra)."""
    for info in pkgutil.walk_packages(cosmosfl.__path__, "cosmosfl."):
        if info.name.startswith(("cosmosfl.apps", "cosmosfl.cli", "cosmosfl.bench")):
            continue  # programs, not libraries: they define no learner
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue

    def walk(cls: type) -> set[type]:
        out = set()
        for sub in cls.__subclasses__():
            out |= {sub} | walk(sub)
        return out

    return {
        cls.__name__
        for cls in walk(Learner)
        if cls.__module__.startswith("cosmosfl.") and not inspect.isabstract(cls)
    }


def test_every_shipped_learner_is_covered():
    assert _shipped_learner_classes() <= set(FACTORIES)


def _init_names(cls: type) -> list[str]:
    return list(inspect.signature(cls.__init__).parameters)[1:]


def _same(a, b) -> bool:
    """Equal parameter values: learners by their parameters, torch modules by type and weights,
    arrays by value, anything else with ==."""
    if isinstance(a, Learner):
        return type(a) is type(b) and _same(a.get_params(), b.get_params())
    if isinstance(a, torch.nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        return (
            type(a) is type(b)
            and sa.keys() == sb.keys()
            and all(torch.equal(sa[k], sb[k]) for k in sa)
        )
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if type(a).__module__.startswith("sklearn"):
        return type(a) is type(b) and a.get_params() == b.get_params()
    if type(a).__name__ == "SiteAccountant":
        return a is b
    return a == b


def _same_state(a, b) -> bool:
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def _fit(learner: Learner) -> None:
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        learner.fit(x, y, epochs=1)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_get_params_are_the_constructor_arguments_as_given(name):
    learner, given = FACTORIES[name]()
    cls = type(learner)
    names = _init_names(cls)
    assert list(learner.get_params()) == names == list(cls.parameter_names())
    params = learner.get_params()
    for key, value in given.items():
        # stored as given: the very object passed (TorchLearner's device and num_classes are
        # resolved, and compare equal)
        assert params[key] is value or (key == "num_classes" and params[key] == value), key


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_clone_is_an_unfitted_learner_with_equal_params(name):
    learner, _ = FACTORIES[name]()
    _fit(learner)
    twin = learner.clone()
    assert type(twin) is type(learner) and twin is not learner
    ours, theirs = learner.get_params(), twin.get_params()
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert _same(ours[key], theirs[key]), key
        if key in type(learner).shared_parameters:
            assert theirs[key] is ours[key], key
        elif isinstance(ours[key], torch.nn.Module | np.ndarray | dict | Learner):
            assert theirs[key] is not ours[key], key  # copied, so training one spares the other
    # unfitted: in the state a learner built from its parameters starts in, not the original's
    if name != "ReleaseRecorder":  # it has no checkpoint state of its own
        rebuilt = type(twin)(**twin.get_params())
        assert _same_state(twin.get_state(), rebuilt.get_state())
        assert not _same_state(twin.get_state(), learner.get_state())


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_clone_with_a_seed_takes_it(name):
    learner, _ = FACTORIES[name]()
    twin = learner.clone(seed=11)
    for holder in (twin, *(v for v in twin.get_params().values() if isinstance(v, Learner))):
        if "seed" in holder.get_params():
            assert holder.get_params()["seed"] == 11


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_changed_parameter_shows_and_a_bad_one_is_refused(name):
    learner, _ = FACTORIES[name]()
    key, value, bad = CHANGES[name]
    assert learner.set_params(**{key: value}) is learner
    assert _same(learner.get_params()[key], value)
    assert learner.clone().get_params()[key] is not None
    assert _same(learner.clone().get_params()[key], value)
    with pytest.raises(ValueError, match=r"has no parameter 'nope'; its parameters: "):
        learner.set_params(nope=1)
    if bad is not None:
        with pytest.raises(ValueError, match=rf"^{key}\b.* got {bad!r}"):
            learner.set_params(**{key: bad})
        assert _same(learner.get_params()[key], value)  # a refused change leaves it as it was
    _fit(learner)  # still a working learner


def test_set_params_rebuilds_what_is_derived_from_parameters():
    learner, _ = _torch()
    _fit(learner)
    learner.set_params(seed=8)
    assert torch.equal(learner._generator.get_state(), torch.Generator().manual_seed(8).get_state())


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: _torch(clip_norm=0.0), r"^clip_norm must be > 0 or None \(no clipping\), got 0"),
        (lambda: _torch(channels_last=1), r"^channels_last = 1 is not allowed; use True or False$"),
        (
            lambda: SklearnLearner(LogisticRegression(), num_classes=3, threads=0),
            r"^threads must be >= 1 or None \(libraries' default\), got 0$",
        ),
        (
            lambda: SklearnLearner(LogisticRegression(), num_classes=3, max_retries=-1),
            r"^max_retries must be >= 0, got -1$",
        ),
        (
            lambda: SklearnLearner(LogisticRegression(), num_classes=3, divergence_tolerance=2.0),
            r"^divergence_tolerance must lie in \[0, 1\] \(accuracy\), got 2.0$",
        ),
    ],
)
def test_constraint_messages_name_the_parameter_the_value_and_what_is_allowed(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("cls", [XGBoostLearner, LightGBMLearner])
def test_booster_constraints_and_rules(cls):
    pytest.importorskip(cls._LIBRARY)
    with pytest.raises(ValueError, match=r"^trees_per_call must be >= 1, got 0$"):
        cls(num_classes=3, trees_per_call=0)
    with pytest.raises(ValueError, match=r"^max_trees \(10\) must be >= num_trees \(50\)$"):
        cls(num_classes=3, num_trees=50, max_trees=10)
    with pytest.raises(ValueError, match=r"^soft_targets 'x' is not supported; allowed: "):
        cls(num_classes=3, soft_targets="x")
    with pytest.raises(ValueError, match=r"^params = \[1\] is not allowed; use a dict"):
        cls(num_classes=3, params=[1])


def test_constraints_are_checked_once_before_the_constructor_runs():
    calls = []

    class Probe(Learner):
        parameter_constraints: ClassVar = {"rate": Interval(float, 0, closed="neither")}

        def __init__(self, rate: float = 1.0) -> None:
            calls.append(rate)
            self.rate = rate
            self.num_classes = 2

        def fit(self, x, y, *, epochs=1):
            return {}

        def predict_proba(self, x):
            return np.full((len(x), 2), 0.5, np.float32)

        def distill(self, x, targets, weights=None, *, epochs=1, lam=0.0):
            return {}

    class Child(Probe):
        parameter_constraints: ClassVar = {"rate": Interval(float, 0, 1)}

        def __init__(self, rate: float = 0.5) -> None:
            super().__init__(rate)

    with pytest.raises(ValueError, match=r"^rate must be > 0, got 0$"):
        Probe(rate=0)
    with pytest.raises(ValueError, match=r"^rate must lie in \[0, 1\], got 2$"):
        Child(rate=2)
    assert calls == []  # refused before the constructor ran
    assert Child(rate=0.25).get_params() == {"rate": 0.25} and calls == [0.25]


def test_a_learner_must_store_its_parameters_and_name_them():
    class Forgetful(TorchLearner):
        def __init__(self, model, *, hidden: int = 3) -> None:
            super().__init__(model, num_classes=M)

    class Variadic(TorchLearner):
        def __init__(self, model, **options) -> None:
            super().__init__(model, **options)

    with pytest.raises(TypeError, match=r"has no attribute 'hidden': store every constructor"):
        Forgetful(_net()).get_params()
    with pytest.raises(TypeError, match=r"takes \*\*options: name every parameter"):
        Variadic(_net(), num_classes=M).clone()


def test_capabilities_are_declared():
    torch_learner, _ = _torch()
    sklearn_learner, _ = _sklearn()
    assert torch_learner.capabilities == Capabilities(torch_model=True, consistency=True)
    assert sklearn_learner.capabilities == Capabilities()
    if importlib.util.find_spec("opacus"):
        dpsgd, _ = _dpsgd()
        assert dpsgd.capabilities.torch_model and dpsgd.capabilities.consistency
    recorder, _ = _release_recorder()
    assert recorder.capabilities is sklearn_learner.capabilities or (
        recorder.capabilities == Capabilities()
    )


def test_the_clients_section_defaults_are_torch_learners():
    """The config's `clients` section repeats some TorchLearner parameters (with the same
    constraint objects); their defaults must be the signature's."""
    import dataclasses

    from cosmosfl.experiment.schema import ClientsConfig
    from cosmosfl.learners.torch import LEARNER_CONSTRAINTS

    signature = inspect.signature(TorchLearner).parameters
    fields = {f.name: f.default for f in dataclasses.fields(ClientsConfig)}
    shared = [*LEARNER_CONSTRAINTS, "channels_last"]
    assert set(shared) <= set(fields) and set(shared) <= set(signature)
    assert {n: fields[n] for n in shared} == {n: signature[n].default for n in shared}
