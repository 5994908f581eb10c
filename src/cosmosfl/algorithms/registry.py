"""Algorithms by name: the shipped ones, yours from Python (`register_algorithm`), and those an
installed package declares in the `cosmosfl.algorithms` entry-point group.

Configs, `cosmosfl run / compare / sweep`, the Flower apps and reports look names up in
`ALGORITHMS` only, so an algorithm registered either way runs wherever a shipped one does,
without an edit to this file.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import warnings
from collections.abc import Iterable, Iterator, MutableMapping
from importlib import metadata
from typing import TypeVar

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.algorithms.comet import Comet
from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.algorithms.ditto import Ditto
from cosmosfl.algorithms.fedavg import FedAvg
from cosmosfl.algorithms.fedbabu import FedBABU
from cosmosfl.algorithms.fedct import FedCT
from cosmosfl.algorithms.fedmd import FedMD
from cosmosfl.algorithms.fedprox import FedProx
from cosmosfl.algorithms.fedselect import FedSelect
from cosmosfl.algorithms.local import Local
from cosmosfl.algorithms.pfedck import PFedCK
from cosmosfl.algorithms.pfedhn import PFedHN

ENTRY_POINT_GROUP = "cosmosfl.algorithms"
# Names become folder names (OUT/<name>/seed<k>) and prefixes of overrides (`name.key=value`,
# `--algorithms a,b`), so they hold no dot, comma, slash, `=` or space.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
# `algorithm.name` also accepts the experiment layer's reference runs (experiment/centralized.py,
# which this layer cannot import); an algorithm of the same name would shadow one. A test keeps
# this set equal to their names.
RESERVED_NAMES = frozenset({"centralized"})

A = TypeVar("A", bound=type[Algorithm])


class AlgorithmRegistry(MutableMapping[str, type[Algorithm]]):
    """name -> algorithm class, in registration order (the shipped ones first).

    The first read loads the `cosmosfl.algorithms` entry points of the installed packages
    (once per process, so a `cosmosfl run` started from the shell knows them). An entry point
    that does not load is left out with a warning naming it, so one broken package does not
    stop runs of the other algorithms. Prefer `register_algorithm` to setting items: it
    checks the class and refuses to replace a shipped algorithm.
    """

    def __init__(self, shipped: Iterable[type[Algorithm]]) -> None:
        self._classes = {cls.name: cls for cls in shipped}
        self.shipped = frozenset(self._classes)
        self.broken: dict[str, str] = {}  # entry-point name -> why it did not load
        self._plugins_loaded = False

    def load_plugins(self) -> None:
        """Register the algorithms of the installed packages' entry points (once)."""
        if self._plugins_loaded:
            return
        # Set first: a plugin module may read or register into the registry while it loads.
        self._plugins_loaded = True
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                cls = entry.load()
                if getattr(cls, "name", None) != entry.name:
                    raise ValueError(
                        f"it names {cls!r}, whose `name` is {getattr(cls, 'name', None)!r}, "
                        f"not the entry point's name {entry.name!r}"
                    )
                register_algorithm(cls)
            except Exception as err:  # a broken package must not stop runs of the others
                why = self.broken[entry.name] = f"{type(err).__name__}: {err}"
                warnings.warn(
                    f"the algorithm {entry.name!r} of entry point {entry.value!r} (group "
                    f"{ENTRY_POINT_GROUP}) did not load and is not available: {why}",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def __getitem__(self, name: str) -> type[Algorithm]:
        self.load_plugins()
        return self._classes[name]

    def __iter__(self) -> Iterator[str]:
        self.load_plugins()
        return iter(list(self._classes))

    def __len__(self) -> int:
        self.load_plugins()
        return len(self._classes)

    def __setitem__(self, name: str, cls: type[Algorithm]) -> None:
        check_algorithm_class(cls)
        if name != cls.name:
            raise ValueError(f"{cls.__name__} is named {cls.name!r}; register it under that name")
        self._classes[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._classes[name]

    def __repr__(self) -> str:
        return f"AlgorithmRegistry({', '.join(self._classes)})"


ALGORITHMS = AlgorithmRegistry(
    [
        Cosmos,
        Local,
        FedMD,
        FedCT,
        Comet,
        # Parameter-sharing baselines: one client architecture only (model_agnostic = False).
        FedAvg,
        FedProx,
        Ditto,
        FedBABU,
        FedSelect,
        PFedCK,
        PFedHN,
    ]
)


def check_algorithm_class(cls: object) -> None:
    """Raise TypeError or ValueError unless `cls` is what configs, engines and reports rely on
    (and registration requires): a concrete `Algorithm` dataclass whose `name` can be a folder
    name and that names its reported evaluation point."""
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise TypeError(f"an algorithm must be a subclass of Algorithm, got {cls!r}")
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} must be a @dataclass: its fields are its settings")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise TypeError(f"{cls.__name__} is abstract: it does not define {missing}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"{cls.__name__}.name = {name!r}: an algorithm's name must be letters, digits, "
            "'_' and '-' (it names run folders and prefixes overrides), e.g. name: "
            'ClassVar[str] = "mine"'
        )
    if not isinstance(cls.reported_model, str) or not cls.reported_model:
        raise ValueError(f"{cls.__name__}.reported_model must name an evaluation point")


def register_algorithm(cls: A, *, overwrite: bool = False) -> A:
    """Register a user algorithm under its `name`, so configs, `cosmosfl run / compare /
    sweep` and reports can name it; returns the class, so it also works as a decorator (above
    `@dataclass`).

    Registering the same class again does nothing; another class under a registered name
    needs `overwrite=True`. A shipped algorithm and the reference runs' names cannot be taken.
    For `cosmosfl` commands started from the shell, declare the class in the
    `cosmosfl.algorithms` entry-point group of your package instead (docs/architecture.md).
    """
    check_algorithm_class(cls)
    name = cls.name
    if name in RESERVED_NAMES:
        raise ValueError(f"algorithm name {name!r} is the name of a reference run; choose another")
    current = ALGORITHMS._classes.get(name)
    if current is cls:
        return cls
    if name in ALGORITHMS.shipped:
        raise ValueError(
            f"algorithm {name!r} is shipped with cosmosfl and cannot be replaced; give "
            f"{cls.__name__} another name"
        )
    if current is not None and not overwrite:
        raise ValueError(
            f"algorithm {name!r} is already registered ({current.__module__}."
            f"{current.__qualname__}); pass overwrite=True to replace it"
        )
    ALGORITHMS[name] = cls
    return cls


def unregister_algorithm(name: str) -> None:
    """Remove a registered user algorithm (tests and notebooks that register again)."""
    if name in ALGORITHMS.shipped:
        raise ValueError(f"algorithm {name!r} is shipped with cosmosfl and cannot be removed")
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is not registered")
    del ALGORITHMS[name]


def algorithm_class(name: str) -> type[Algorithm]:
    try:
        return ALGORITHMS[name]
    except KeyError:
        why = ALGORITHMS.broken.get(name)
        broken = f" (its entry point did not load: {why})" if why else ""
        raise ValueError(
            f"algorithm {name!r} is not known{broken}; allowed: {', '.join(sorted(ALGORITHMS))}"
        ) from None
