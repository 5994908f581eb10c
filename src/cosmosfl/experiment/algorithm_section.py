"""The config's `algorithm` section: the algorithm (or reference run) built and validated once.

`validate_algorithm` checks the section's keys and types, each value against the class's
`parameter_constraints`, then builds the class once, which runs the checks that involve several
settings. The `AlgorithmSection` it returns holds that typed object (`built`) and reads as the
resolved settings, `{name, **every setting}` (what config.yaml stores); a run takes its own
copy with `fresh`, so nothing is built or checked a second time and one config can run many
times.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from cosmosfl.algorithms.registry import ALGORITHMS, algorithm_class
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.references import REFERENCE_RUNS
from cosmosfl.experiment.value_types import build_section

if TYPE_CHECKING:
    from cosmosfl.algorithms.base import Algorithm
    from cosmosfl.experiment.references import Centralized


class AlgorithmSection(Mapping[str, Any]):
    """The validated `algorithm` section: `built`, the typed algorithm (or reference run), and,
    read as a mapping, `settings`, its name and every setting resolved (`section["lam"]`,
    `dict(section)`). Read-only: a changed setting is a new section (`validate_algorithm`),
    checked like the first."""

    def __init__(self, built: Algorithm | Centralized, settings: Mapping[str, Any]) -> None:
        self._built = built
        self._settings = dict(settings)

    @property
    def name(self) -> str:
        return str(self._settings["name"])

    @property
    def built(self) -> Algorithm | Centralized:
        """The algorithm as validated; never run (runs take `fresh` copies)."""
        return self._built

    def fresh(self, **injected: Any) -> Algorithm | Centralized:
        """A copy of the validated algorithm for one run, with the `injected` fields it has set
        (the server-model factory, a probe; None: left as it is): a copy, so neither built nor
        checked again."""
        algorithm = copy.deepcopy(self._built)
        for key, value in injected.items():
            if value is not None and hasattr(algorithm, key):
                setattr(algorithm, key, value)
        return algorithm

    def __getitem__(self, key: str) -> Any:
        return self._settings[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settings)

    def __len__(self) -> int:
        return len(self._settings)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self) == dict(other)

    __hash__ = None  # type: ignore[assignment]  # equal to dicts, so unhashable like them

    def __repr__(self) -> str:
        return f"AlgorithmSection({self._settings!r})"

    def __deepcopy__(self, memo: dict[int, Any]) -> AlgorithmSection:
        return AlgorithmSection(copy.deepcopy(self._built, memo), copy.deepcopy(self._settings))


def reference_runs() -> dict[str, type]:
    """Runs accepted in `algorithm.name` that are not federated algorithms (e.g. centralized).

    They are reported beside the algorithms but are not in the algorithm registry, because they
    may do what no protocol may (the centralized reference pools private data); see
    experiment/references.py.
    """
    return dict(REFERENCE_RUNS)


def _allowed_names() -> str:
    return (
        f"{', '.join(sorted(ALGORITHMS))}; "
        f"reference runs (not federated): {', '.join(sorted(reference_runs()))}"
    )


def settings_class(name: str) -> type:
    """The class whose fields are the settings of `algorithm.name` (algorithm or reference run)."""
    if not isinstance(name, str):
        raise ConfigError(f"algorithm.name = {name!r} must be a name; allowed: {_allowed_names()}")
    if name in ALGORITHMS:
        return algorithm_class(name)
    references = reference_runs()
    if name in references:
        return references[name]
    raise ConfigError(f"algorithm.name = {name!r} is not known; allowed: {_allowed_names()}")


def algorithm_options(name: str) -> dict[str, dataclasses.Field]:
    """The config-settable hyperparameters of an algorithm (its init fields with plain types)."""
    cls = settings_class(name)
    hints = typing.get_type_hints(cls)
    settable = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        if _type_ok_for_config(hints[f.name]):
            settable[f.name] = f
    return settable


def _type_ok_for_config(hint: Any) -> bool:
    args = typing.get_args(hint) or (hint,)
    return all(a in (int, float, str, bool, type(None)) for a in args)


def validate_algorithm(raw: Any) -> AlgorithmSection:
    """The `algorithm` section `raw` (a mapping with a `name`) read as every section is
    (`build_section`), as the class its name picks, and so built once."""
    if not isinstance(raw, Mapping) or "name" not in raw:
        raise ConfigError(f"algorithm must be a mapping with a 'name' (one of {_allowed_names()})")
    raw = dict(raw)
    name = raw.pop("name")
    cls = settings_class(name)
    options = algorithm_options(name)
    # Each value against the class's declared constraints (core/constraints.py), then the
    # algorithm itself for combinations of settings, all before any training.
    built = build_section(
        cls,
        _renamed_keys(cls, name, raw),
        "algorithm",
        keys=sorted(options),
        name=name,
        constrained=True,
    )
    # The resolved section names every setting, defaults included, so a run directory's
    # config.yaml reproduces the run even if a default changes later.
    return AlgorithmSection(built, {"name": name, **{key: getattr(built, key) for key in options}})


def _renamed_keys(cls: type, name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with deprecated setting names (the class's `renamed_parameters`) replaced by the
    current ones, each with a DeprecationWarning; both names at once is an error."""
    renamed = getattr(cls, "renamed_parameters", {})
    if not any(key in renamed for key in raw):
        return raw
    out = {}
    for key, value in raw.items():
        new = renamed.get(key)
        if new is None:
            out[key] = value
            continue
        if new in raw:
            raise ConfigError(
                f"algorithm.{key} and algorithm.{new} are one setting of {name} ({key} is its "
                f"deprecated name); set only algorithm.{new}"
            )
        warnings.warn(
            f"algorithm.{key} of {name} is deprecated; use algorithm.{new} (same meaning)",
            DeprecationWarning,
            stacklevel=4,  # _renamed_keys <- validate_algorithm <- load_config <- caller
        )
        out[new] = value
    return out


__all__ = [
    "AlgorithmSection",
    "algorithm_options",
    "reference_runs",
    "settings_class",
    "validate_algorithm",
]
