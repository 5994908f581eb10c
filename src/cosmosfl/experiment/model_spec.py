"""What `clients.models` can name, and how each name becomes a client's model.

A config names a client model in one of three ways:

- a network of the model registry (`mlp`, `cnn`, `resnet8`, ...; `register_model` adds yours);
- a short name for a common estimator (`SHORT_NAMES`: `logistic_regression`, `random_forest`,
  `knn`, `hist_gradient_boosting`, `xgboost`, `lightgbm`);
- an import path to any class or factory, `package.module.Name` or `package.module:name`, with
  keyword arguments: `{sklearn.ensemble.HistGradientBoostingClassifier: {weight: 0.3,
  max_iter: 200}}` (`weight` is the share of clients, the rest are arguments).

What a name builds decides how it trains: a `Learner` is used as it is; a torch `nn.Module` is
wrapped in a `TorchLearner` with the `clients` section's settings; anything with
`predict_proba` (a scikit-learn estimator or pipeline, XGBoost, LightGBM) in the learner for
its framework. Names are imported and their arguments checked against the signature when the
config is loaded, so a typo fails before any data is read. Arguments named `num_classes`,
`seed`, `input_shape`, `in_features`, `in_channels` or `image_size` that a factory accepts but
the config does not set are filled in from the data and the run; an estimator's
`random_state`, when not set, gets the client's seed (runs stay reproducible).
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from cosmosfl.experiment.errors import ConfigError
from cosmosfl.models.registry import model_names

__all__ = ["SHORT_NAMES", "ModelSpec", "parse_models", "resolve"]

# Short names for estimators a tabular team reaches for first: (import path, default arguments).
SHORT_NAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "logistic_regression": ("sklearn.linear_model.LogisticRegression", {"max_iter": 300}),
    "random_forest": (
        "sklearn.ensemble.RandomForestClassifier",
        {"n_estimators": 100, "n_jobs": 1},
    ),
    "knn": ("sklearn.neighbors.KNeighborsClassifier", {"n_neighbors": 5}),
    "hist_gradient_boosting": ("sklearn.ensemble.HistGradientBoostingClassifier", {}),
    "xgboost": ("cosmosfl.learners.XGBoostLearner", {}),
    "lightgbm": ("cosmosfl.learners.LightGBMLearner", {}),
}
# The extra that provides a package an import path needs, for the error message.
EXTRAS = {"xgboost": "xgboost", "lightgbm": "lightgbm"}
# Arguments filled in from the run when a factory takes them and the config leaves them out.
CONTEXT_ARGUMENTS = (
    "num_classes",
    "seed",
    "input_shape",
    "in_features",
    "in_channels",
    "image_size",
)


@dataclass(frozen=True)
class ModelSpec:
    """One entry of `clients.models`: the name as written, its keyword arguments, and its
    share of the clients (mapping form only)."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    weight: float | None = None

    @property
    def registry(self) -> bool:
        """A network of the model registry (the kind parameter-sharing algorithms need)."""
        return self.name in model_names()

    @property
    def target(self) -> str | None:
        """The import path this spec builds from (None for registry networks)."""
        if self.registry:
            return None
        return SHORT_NAMES[self.name][0] if self.name in SHORT_NAMES else self.name

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments: a short name's defaults, overridden by the config's."""
        base = dict(SHORT_NAMES[self.name][1]) if self.name in SHORT_NAMES else {}
        return {**base, **self.options}


def parse_models(
    models: Any, where: str = "clients.models", *, check: bool = True
) -> list[ModelSpec]:
    """The entries of `clients.models` (a mapping {name: weight or {weight, **arguments}} or a
    list of names / {name: {arguments}}); with `check`, each is checked: known or importable,
    with arguments that its signature accepts."""
    specs: list[ModelSpec] = []
    if isinstance(models, dict):
        items = list(models.items())
        for name, value in items:
            if isinstance(value, dict):
                options = dict(value)
                weight = options.pop("weight", 1.0)
            else:
                options, weight = {}, value
            if (
                isinstance(weight, bool)
                or not isinstance(weight, numbers.Real)
                or not 0 < weight < math.inf
            ):
                raise ConfigError(
                    f"{where}.{name}: weight = {weight!r} is the share of clients with this "
                    "model; give positive fractions, e.g. {cnn: 0.5, mlp: 0.5}"
                )
            specs.append(ModelSpec(str(name), options, float(weight)))
    elif isinstance(models, list):
        for entry in models:
            if isinstance(entry, str):
                specs.append(ModelSpec(entry))
            elif isinstance(entry, dict) and len(entry) == 1:
                ((name, options),) = entry.items()
                if not isinstance(options, dict):
                    raise ConfigError(
                        f"{where}: the entry {entry!r} must map a name to its arguments, e.g. "
                        "{sklearn.neighbors.KNeighborsClassifier: {n_neighbors: 7}}"
                    )
                if "weight" in options:
                    raise ConfigError(
                        f"{where}: {name} has a weight in a list (one entry per client); weights "
                        "belong to the mapping form {name: {weight: 0.5, ...}}"
                    )
                specs.append(ModelSpec(str(name), dict(options)))
            else:
                raise ConfigError(
                    f"{where}: each list entry must be a name or {{name: {{arguments}}}}, got "
                    f"{entry!r}"
                )
    else:
        raise ConfigError(f"{where} must be a mapping or a list, got {models!r}")
    if check:
        for spec in {s.name: s for s in specs}.values():
            check_spec(spec, where)
    return specs


def check_spec(spec: ModelSpec, where: str = "clients.models") -> None:
    """Fail with a ConfigError unless `spec` names a registry network with no arguments (they
    come from the `clients` section) or an importable callable that takes its arguments."""
    if spec.registry:
        if spec.options:
            raise ConfigError(
                f"{where}.{spec.name}: registry networks take their settings from the clients "
                f"section (clients.width, clients.lr, ...), not arguments "
                f"{sorted(spec.options)}"
            )
        return
    target = spec.target
    assert target is not None
    obj = import_target(target, spec.name, where)
    arguments = spec.arguments()
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return  # builtins and C extensions without a signature: checked when built
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    unknown = sorted(a for a in arguments if a not in signature.parameters)
    if unknown and not accepts_any:
        allowed = [n for n, p in signature.parameters.items() if p.kind is not p.VAR_POSITIONAL]
        raise ConfigError(
            f"{where}.{spec.name}: {target} takes no argument(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(allowed) or 'none'}"
        )


def import_target(target: str, name: str, where: str = "clients.models") -> Any:
    """The object at `package.module.Name` or `package.module:name` (never `eval`)."""
    known = sorted({*model_names(), *SHORT_NAMES})
    if ":" in target:
        module_name, _, attribute = target.partition(":")
    else:
        module_name, _, attribute = target.rpartition(".")
    if not module_name or not attribute:
        raise ConfigError(
            f"{where}: unknown model(s) {name}; allowed: {', '.join(known)}, or any class or "
            "factory by import path (sklearn.ensemble.RandomForestClassifier, mypkg.models:build)"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        top = module_name.split(".")[0]
        hint = f"; install it with pip install 'cosmosfl[{EXTRAS[top]}]'" if top in EXTRAS else ""
        raise ConfigError(
            f"{where}: model {name!r} needs the module {module_name!r}, which cannot be "
            f"imported ({err}){hint}"
        ) from None
    try:
        obj = module
        for part in attribute.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise ConfigError(
            f"{where}: module {module_name!r} has no {attribute!r} (model {name!r})"
        ) from None
    if not callable(obj):
        raise ConfigError(f"{where}: {target} is not a class or function (model {name!r})")
    return obj


def resolve(spec: ModelSpec, context: dict[str, Any]) -> Any:
    """Call `spec`'s class or factory: its arguments, plus the run's `context` values
    (CONTEXT_ARGUMENTS) that it accepts and the config did not set, and an unset
    `random_state` from `context["seed"]`. Returns what it built (not yet a learner)."""
    target = spec.target
    if target is None:
        raise ValueError(f"{spec.name} is a registry network, built by the model registry")
    obj = import_target(target, spec.name)
    arguments = spec.arguments()
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        parameters = {}
    for key in CONTEXT_ARGUMENTS:
        if key in parameters and key not in arguments and key in context:
            arguments[key] = context[key]
    if "random_state" in parameters and arguments.get("random_state") is None:
        arguments["random_state"] = int(context["seed"]) % 2**31
    try:
        return obj(**arguments)
    except TypeError as err:
        raise ConfigError(f"clients.models.{spec.name}: building {target} failed: {err}") from None
