"""Declarative checks of hyperparameters: what values a setting allows, written once.

A class lists its settings' constraints in `parameter_constraints` (as scikit-learn's
`_parameter_constraints`), e.g. ``{"temperature": Interval(float, 0, note="0 = hard labels"),
"aggregation": Options(AGGREGATIONS)}``; `check_parameters` enforces them and raises one
`ValueError` naming the setting, the value and what is allowed. Algorithms check them when
constructed and the config layer before it builds one, so both report the same message; a
runtime function that takes the same setting (`aggregate`, `apply_temperature`) checks the same
constraint object. Checks that involve several settings stay in the class's `__post_init__`.
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


_BRACKETS = {"both": "[]", "left": "[)", "right": "(]", "neither": "()"}


@dataclass(frozen=True)
class Interval:
    """A number of type `kind` (int or float) in a range; NaN and infinities are refused.

    `closed` names the ends that are included ("both", "left", "right", "neither"); a missing
    end is unbounded. `none`, if given, allows None and says what it means ("exact"). `note`
    explains a special value ("0 = hard labels"); `symbol` is the paper's name ("λ").
    """

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"
    none: str | None = None
    note: str = ""
    symbol: str = ""

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

    def describe(self) -> str:
        kind = "an integer" if self.kind is int else "a number"
        text = f"{kind} {self._range().removeprefix('lie ')}"
        if self.none is not None:
            text += f" or None ({self.none})"
        return text + (f" ({self.note})" if self.note else "")

    def error(self, name: str, value: Any) -> str | None:
        if value is None and self.none is not None:
            return None
        label = f"{name} ({self.symbol})" if self.symbol else name
        rng = self._range()  # "lie in [a, b)" reads "must lie in", ">= 0" reads "must be >= 0"
        must = f"must {rng}" if rng.startswith("lie ") else f"must be {rng}"
        tail = (f" or None ({self.none})" if self.none is not None else "") + (
            f" ({self.note})" if self.note else ""
        )
        number = numbers.Integral if self.kind is int else numbers.Real
        if isinstance(value, bool) or not isinstance(value, number):
            kind = "an integer" if self.kind is int else "a number"
            return f"{label} must be {kind} {rng.removeprefix('lie ')}{tail}, got {value!r}"
        if not math.isfinite(value):
            return f"{label} must be a finite number {rng.removeprefix('lie ')}{tail}, got {value}"
        if not self._contains(value):
            return f"{label} {must}{tail}, got {value}"
        return None


@dataclass(frozen=True)
class Options:
    """One of a few names. `values` may be a function, for lists that grow at run time."""

    values: tuple[str, ...] | Callable[[], Iterable[str]]

    def allowed(self) -> tuple[str, ...]:
        return tuple(self.values() if callable(self.values) else self.values)

    def describe(self) -> str:
        return f"one of {', '.join(self.allowed())}"

    def error(self, name: str, value: Any) -> str | None:
        allowed = self.allowed()
        if isinstance(value, str) and value in allowed:
            return None
        return f"{name} {value!r} is not supported; allowed: {', '.join(allowed)}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else str(x)


def check(constraint: Constraint, name: str, value: Any) -> None:
    """Raise ValueError if `value` breaks `constraint` (for functions taking one setting)."""
    message = constraint.error(name, value)
    if message is not None:
        raise ValueError(message)


def constraints_of(cls: type) -> dict[str, Constraint]:
    """Every `parameter_constraints` entry of `cls` and its bases (a subclass's win)."""
    out: dict[str, Constraint] = {}
    for klass in reversed(cls.__mro__):
        out.update(vars(klass).get("parameter_constraints", {}))
    return out


def check_parameters(cls: type, values: Mapping[str, Any]) -> None:
    """Check the given settings of `cls` against its constraints, in the order they are
    declared; the first violation raises ValueError (settings not given are not checked)."""
    for name, constraint in constraints_of(cls).items():
        if name in values:
            check(constraint, name, values[name])


def check_instance(obj: Any) -> None:
    """Check every constrained setting of `obj` (for `__post_init__`)."""
    constraints = constraints_of(type(obj))
    check_parameters(type(obj), {name: getattr(obj, name) for name in constraints})
