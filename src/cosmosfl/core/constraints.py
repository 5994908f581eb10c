"""Declarative checks of hyperparameters: what values a setting allows, written once.

A class lists its settings' constraints in `parameter_constraints` (as scikit-learn's
`_parameter_constraints`), e.g. ``{"temperature": Interval(float, 0, note="0 = hard labels"),
"aggregation": Options(AGGREGATIONS)}``; `check_parameters` enforces them and raises one
`ValueError` naming the setting, the value and what is allowed. Algorithms check them when
constructed and the config layer before it builds one, so both report the same message; a
runtime function that takes the same setting (`aggregate`, `apply_temperature`) checks the same
constraint object. Checks that involve several settings stay in the class's `__post_init__`, or
are declared as `parameter_rules` (a list of `Rule`: a test of the whole object and its message).

The config sections (experiment/schema.py, `FaultConfig`) declare theirs the same way and are
checked by the same functions with a `prefix` (the section's name): a message then names the
dotted key, ``clients.lr = -1.0 is not allowed; use a number > 0`` (`keyed_error`). A setting
that a class and a config section share (TorchLearner's `lr` and `clients.lr`) uses one
constraint object in both. `Custom` is a test with its own advice, for rules that are no range
and no list of names.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class Constraint(Protocol):
    def error(self, name: str, value: Any) -> str | None:
        """Why `value` is not allowed for setting `name` (None: it is allowed)."""
        ...

    def describe(self) -> str:
        """What is allowed, in a few words (for help texts and docs)."""
        ...

    def hint(self) -> str:
        """What to set instead, for a config message ("use an integer >= 1", "allowed: a, b")."""
        ...


# A config message: the dotted key, the value and what to set instead. A constraint's `message`
# may replace it (fields: key, value, hint, allowed = describe()).
KEYED_MESSAGE = "{key} = {value!r} is not allowed; {hint}"


_BRACKETS = {"both": "[]", "left": "[)", "right": "(]", "neither": "()"}


@dataclass(frozen=True)
class Interval:
    """A number of type `kind` (int or float) in a range; NaN and infinities are refused.

    `closed` names the ends that are included ("both", "left", "right", "neither"); a missing
    end is unbounded. `none`, if given, allows None and says what it means ("exact"). `note`
    explains a special value ("0 = hard labels"); `symbol` is the paper's name ("λ"); `noun`
    replaces "a number" / "an integer" in messages ("a fraction"); `message` replaces
    KEYED_MESSAGE for config keys.
    """

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"
    none: str | None = None
    note: str = ""
    symbol: str = ""
    noun: str = ""
    message: str = ""

    def __post_init__(self) -> None:
        if self.kind not in (int, float) or self.closed not in _BRACKETS:
            raise ValueError(f"Interval({self.kind!r}, closed={self.closed!r}) is not supported")

    def _range(self) -> str:
        """'>= 0', '> 0', '<= 1' or 'lie in [0, 0.5)'."""
        low_in, high_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            left, right = _BRACKETS[self.closed]
            return f"lie in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"{'>=' if low_in else '>'} {_num(self.low)}"
        if self.high is not None:
            return f"{'<=' if high_in else '<'} {_num(self.high)}"
        return "any"

    def _contains(self, x: float) -> bool:
        low_in, high_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and not (x >= self.low if low_in else x > self.low):
            return False
        return self.high is None or (x <= self.high if high_in else x < self.high)

    def _kind(self) -> str:
        return self.noun or ("an integer" if self.kind is int else "a number")

    def _tail(self, none: str = "None") -> str:
        """' or None (exact)' and ' (note)' as they apply."""
        tail = ""
        if self.none is not None:
            tail = f" or {none}" + (f" ({self.none})" if self.none else "")
        return tail + (f" ({self.note})" if self.note else "")

    def describe(self) -> str:
        return f"{self._kind()} {self._range().removeprefix('lie ')}{self._tail()}"

    def hint(self) -> str:
        return f"use {self._kind()} {self._range().removeprefix('lie ')}{self._tail('null')}"

    def error(self, name: str, value: Any) -> str | None:
        if value is None and self.none is not None:
            return None
        label = f"{name} ({self.symbol})" if self.symbol else name
        rng = self._range()  # "lie in [a, b)" reads "must lie in", ">= 0" reads "must be >= 0"
        must = f"must {rng}" if rng.startswith("lie ") else f"must be {rng}"
        tail = self._tail()
        number = numbers.Integral if self.kind is int else numbers.Real
        if isinstance(value, bool) or not isinstance(value, number):
            return f"{label} must be {self._kind()} {rng.removeprefix('lie ')}{tail}, got {value!r}"
        if not math.isfinite(value):
            return f"{label} must be a finite number {rng.removeprefix('lie ')}{tail}, got {value}"
        if not self._contains(value):
            return f"{label} {must}{tail}, got {value}"
        return None


@dataclass(frozen=True)
class Options:
    """One of a few names. `values` may be a function, for lists that grow at run time;
    `message` replaces KEYED_MESSAGE for config keys."""

    values: tuple[str, ...] | Callable[[], Iterable[str]]
    message: str = ""

    def allowed(self) -> tuple[str, ...]:
        return tuple(self.values() if callable(self.values) else self.values)

    def describe(self) -> str:
        return f"one of {', '.join(self.allowed())}"

    def hint(self) -> str:
        return f"allowed: {', '.join(self.allowed())}"

    def error(self, name: str, value: Any) -> str | None:
        allowed = self.allowed()
        if isinstance(value, str) and value in allowed:
            return None
        return f"{name} {value!r} is not supported; allowed: {', '.join(allowed)}"


@dataclass(frozen=True)
class Custom:
    """Any test of one value, with what to set instead (`advice`, e.g. "use a path or null"):
    for the few rules that are no range and no list of names."""

    test: Callable[[Any], bool]
    advice: str
    message: str = ""

    def describe(self) -> str:
        return self.advice.removeprefix("use ")

    def hint(self) -> str:
        return self.advice

    def error(self, name: str, value: Any) -> str | None:
        return None if self.test(value) else f"{name} = {value!r} is not allowed; {self.advice}"


@dataclass(frozen=True)
class Rule:
    """A check of several settings together, in a class's `parameter_rules`: `test(obj)` must
    hold, else `message(obj)` is the error (it names the settings itself)."""

    test: Callable[[Any], bool]
    message: Callable[[Any], str]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else str(x)


def keyed_error(constraint: Constraint, key: str, value: Any) -> str | None:
    """Why `value` is not allowed for the config key `key` (dotted), in the config's words:
    KEYED_MESSAGE or the constraint's own `message`; None if it is allowed."""
    if constraint.error(key, value) is None:
        return None
    template = getattr(constraint, "message", "") or KEYED_MESSAGE
    return template.format(
        key=key, value=value, hint=constraint.hint(), allowed=constraint.describe()
    )


def check(constraint: Constraint, name: str, value: Any, prefix: str | None = None) -> None:
    """Raise ValueError if `value` breaks `constraint` (for functions taking one setting). With a
    `prefix` (a config section's name, "" for the top level), the message names the dotted key
    as the config does (`keyed_error`)."""
    if prefix is None:
        message = constraint.error(name, value)
    else:
        message = keyed_error(constraint, f"{prefix}.{name}" if prefix else name, value)
    if message is not None:
        raise ValueError(message)


def constraints_of(cls: type) -> dict[str, Constraint]:
    """Every `parameter_constraints` entry of `cls` and its bases (a subclass's win)."""
    out: dict[str, Constraint] = {}
    for klass in reversed(cls.__mro__):
        out.update(vars(klass).get("parameter_constraints", {}))
    return out


def rules_of(cls: type) -> list[Rule]:
    """Every `parameter_rules` entry of `cls` and its bases, the bases' first."""
    return [
        rule for klass in reversed(cls.__mro__) for rule in vars(klass).get("parameter_rules", ())
    ]


def check_parameters(cls: type, values: Mapping[str, Any], prefix: str | None = None) -> None:
    """Check the given settings of `cls` against its constraints, in the order they are
    declared; the first violation raises ValueError (settings not given are not checked).
    `prefix`: a config section's name, for messages naming the dotted key (see `check`)."""
    for name, constraint in constraints_of(cls).items():
        if name in values:
            check(constraint, name, values[name], prefix)


def check_instance(obj: Any, prefix: str | None = None) -> None:
    """Check every constrained setting of `obj`, then its `parameter_rules` (for
    `__post_init__`, and the config layer for each section); the first violation raises
    ValueError."""
    constraints = constraints_of(type(obj))
    check_parameters(type(obj), {name: getattr(obj, name) for name in constraints}, prefix)
    check_rules(obj)


def check_rules(obj: Any) -> None:
    """Check the `parameter_rules` of `obj`'s class, in order; the first that fails raises
    ValueError with its message."""
    for rule in rules_of(type(obj)):
        if not rule.test(obj):
            raise ValueError(rule.message(obj))
