"""Declarative hyperparameter constraints (core/constraints.py): what they allow and the one
message a violation gives."""

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from cosmosfl.core.constraints import (
    Custom,
    Interval,
    Options,
    Rule,
    check,
    check_instance,
    check_parameters,
    constraints_of,
    keyed_error,
)


@pytest.mark.parametrize(
    ("constraint", "value", "message"),
    [
        (Interval(int, 0), -1, "epochs must be >= 0, got -1"),
        (Interval(int, 0), 1.5, "epochs must be an integer >= 0, got 1.5"),
        (Interval(int, 0), True, "epochs must be an integer >= 0, got True"),
        (Interval(int, 1), None, "epochs must be an integer >= 1, got None"),
        (Interval(float, 0, closed="neither"), 0.0, "epochs must be > 0, got 0.0"),
        (Interval(float, 0, 0.5, closed="left"), 0.5, r"epochs must lie in \[0, 0.5\), got 0.5"),
        (Interval(float, 0, 1, closed="right"), 0, r"epochs must lie in \(0, 1\], got 0"),
        (Interval(float, None, 1, closed="neither"), 1, "epochs must be < 1, got 1"),
        (Interval(float, 0), math.nan, "epochs must be a finite number >= 0, got nan"),
        (Interval(float, 0), math.inf, "epochs must be a finite number >= 0, got inf"),
        (Interval(float, 0), "high", "epochs must be a number >= 0, got 'high'"),
        (Interval(float, 0, note="0 = off"), -2, r"epochs must be >= 0 \(0 = off\), got -2"),
        (Interval(float, 0, symbol="λ"), -2, r"epochs \(λ\) must be >= 0, got -2"),
        (Interval(int, 1, none="exact"), 0, r"epochs must be >= 1 or None \(exact\), got 0"),
        (Options(("a", "b")), "c", "epochs 'c' is not supported; allowed: a, b"),
        (Options(("a", "b")), 1, "epochs 1 is not supported; allowed: a, b"),
        (Options(lambda: ["x"]), "a", "epochs 'a' is not supported; allowed: x"),
    ],
)
def test_a_violation_names_the_setting_the_value_and_what_is_allowed(constraint, value, message):
    assert constraint.error("epochs", value) is not None
    with pytest.raises(ValueError, match=f"^{message}$"):
        check(constraint, "epochs", value)


@pytest.mark.parametrize(
    ("constraint", "value"),
    [
        (Interval(int, 0), 0),
        (Interval(int, 0), np.int64(3)),  # numpy integers are integers
        (Interval(float, 0), 2),  # ints are numbers
        (Interval(float, 0), np.float32(0.5)),
        (Interval(float, 0, 0.5, closed="left"), 0.0),
        (Interval(float, 0, 1, closed="right"), 1.0),
        (Interval(int, 1, none="exact"), None),
        (Options(("a", "b")), "b"),
    ],
)
def test_allowed_values_pass(constraint, value):
    assert constraint.error("x", value) is None
    check(constraint, "x", value)


def test_describe_says_what_is_allowed():
    assert Interval(int, 0).describe() == "an integer >= 0"
    assert Interval(float, 0, 0.5, closed="left").describe() == "a number in [0, 0.5)"
    assert Interval(int, 1, none="exact").describe() == "an integer >= 1 or None (exact)"
    assert Options(("mean", "max")).describe() == "one of mean, max"


def test_an_interval_of_another_kind_is_a_bug():
    with pytest.raises(ValueError, match="not supported"):
        Interval(str, 0)
    with pytest.raises(ValueError, match="not supported"):
        Interval(int, 0, closed="open")


@dataclass
class Base:
    parameter_constraints: ClassVar = {"a": Interval(int, 0), "b": Options(("x", "y"))}
    a: int = 0
    b: str = "x"

    def __post_init__(self):
        check_instance(self)


@dataclass
class Child(Base):
    parameter_constraints: ClassVar = {"b": Options(("z",)), "c": Interval(float, 0)}
    b: str = "z"
    c: float = 1.0


def test_constraints_merge_along_the_bases_and_a_subclass_wins():
    merged = constraints_of(Child)
    assert list(merged) == ["a", "b", "c"]
    assert merged["b"] == Options(("z",))
    with pytest.raises(ValueError, match="a must be >= 0"):
        Child(a=-1)
    with pytest.raises(ValueError, match="b 'x' is not supported; allowed: z"):
        Child(b="x")
    Child()


def test_check_parameters_checks_the_given_settings_only():
    check_parameters(Child, {"c": 0.0})  # a and b are not given: not checked
    with pytest.raises(ValueError, match="c must be >= 0"):
        check_parameters(Child, {"c": -1.0})


@pytest.mark.parametrize(
    ("constraint", "value", "message"),
    [
        (Interval(int, 1), 0, "s.n = 0 is not allowed; use an integer >= 1"),
        (Interval(float, 0, closed="neither"), -1.0, "s.n = -1.0 is not allowed; use a number > 0"),
        (Interval(int, 1, none=""), 0, "s.n = 0 is not allowed; use an integer >= 1 or null"),
        (
            Interval(float, 0, 1, closed="left", noun="a fraction", note="0 = none"),
            1.0,
            r"s.n = 1.0 is not allowed; use a fraction in \[0, 1\) \(0 = none\)",
        ),
        (Options(("a", "b")), "c", "s.n = 'c' is not allowed; allowed: a, b"),
        (Custom(lambda v: v != "", "use a name"), "", "s.n = '' is not allowed; use a name"),
        (
            Interval(float, 0, 1, noun="a fraction", message="{key} = {value!r} must be {allowed}"),
            2,
            r"s.n = 2 must be a fraction in \[0, 1\]$",
        ),
        (Options(("a",), message="{key} = {value!r}; {hint}"), "x", "s.n = 'x'; allowed: a$"),
    ],
)
def test_a_config_key_names_the_dotted_key_and_what_to_use(constraint, value, message):
    assert keyed_error(constraint, "s.n", value) is not None
    with pytest.raises(ValueError, match=message):
        check(constraint, "n", value, prefix="s")


def test_the_top_level_prefix_names_the_bare_key():
    with pytest.raises(ValueError, match=r"^rounds = 0 is not allowed"):
        check(Interval(int, 1), "rounds", 0, prefix="")


@dataclass
class Section:
    parameter_constraints: ClassVar = {
        "low": Interval(int, 0),
        "name": Custom(str.strip, "use a name"),
    }
    parameter_rules: ClassVar = [
        Rule(lambda s: s.low <= s.high, lambda s: f"sec: low = {s.low} must be <= high = {s.high}")
    ]
    low: int = 0
    high: int = 1
    name: str = "x"


def test_check_instance_checks_the_fields_then_the_rules():
    check_instance(Section())
    with pytest.raises(ValueError, match=r"^sec.low = -1 is not allowed; use an integer >= 0$"):
        check_instance(Section(low=-1), prefix="sec")
    with pytest.raises(ValueError, match=r"^sec.name = ' ' is not allowed; use a name$"):
        check_instance(Section(name=" "), prefix="sec")
    with pytest.raises(ValueError, match=r"^sec: low = 2 must be <= high = 1$"):
        check_instance(Section(low=2), prefix="sec")
