"""A learner's parameters, with scikit-learn's discipline (`sklearn/base.py`, `BaseEstimator`):
the constructor's signature *is* the parameter list.

- A learner stores each constructor argument under its own name (`self.lr = lr`), and keeps
  what it derives from them (a random stream, a resolved default) in private fields.
- `parameter_names(cls)` reads the names from `__init__`'s signature; `get_params`,
  `set_params` and `clone` (on `Learner`) are built from them, so no learner writes its
  parameter list a second time.
- `parameter_constraints` (and `parameter_rules` for checks of several parameters) are
  checked in one place, `check_learner_parameters`, which `Learner` runs before the outermost
  constructor of every subclass (`checked_init`): a bad value is refused before the learner
  builds anything, with a message naming the parameter, the value and what is allowed.

Two parameters of TorchLearner hold their resolved value, because the engines read and move
them as the `Learner` contract's attributes: `num_classes` (inferred from the model when not
given) and `device` (a `torch.device`). Passing either back to the constructor builds the same
learner, which is all `clone` needs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from cosmosfl.core.constraints import check_parameters, rules_of

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@functools.cache
def parameter_names(cls: type) -> tuple[str, ...]:
    """The names of `cls.__init__`'s parameters (after `self`), in order: a learner's
    parameters. A signature with *args or **kwargs has no parameter list, so it is refused."""
    init = cls.__init__  # type: ignore[misc]
    if init is object.__init__:
        return ()
    names = []
    for param in list(inspect.signature(init).parameters.values())[1:]:
        if param.kind in _VARIADIC:
            stars = "*" if param.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise TypeError(
                f"{cls.__name__}.__init__ takes {stars}{param.name}: name every parameter of a "
                "learner in its constructor's signature "
                "(get_params and clone read them from it, as scikit-learn's estimators do)"
            )
        names.append(param.name)
    return tuple(names)


def check_learner_parameters(cls: type, values: Mapping[str, Any]) -> None:
    """Raise ValueError unless `values` (parameter name -> value) satisfy `cls`'s
    `parameter_constraints` (in declaration order) and then its `parameter_rules`."""
    check_parameters(cls, values)
    rules = rules_of(cls)
    if rules:
        view = SimpleNamespace(**values)  # a rule reads parameters as attributes
        for rule in rules:
            if not rule.test(view):
                raise ValueError(rule.message(view))


def checked_init(init: Callable[..., None]) -> Callable[..., None]:
    """`init` (a learner's `__init__`), checking the parameters it is called with first when it
    is the constructor of the object's own class (a base class's `__init__`, reached through
    `super()`, does not check again)."""
    if getattr(init, "_checks_parameters", False):
        return init
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if type(self).__init__ is __init__:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            values = dict(list(bound.arguments.items())[1:])
            for name, param in signature.parameters.items():
                if param.kind is inspect.Parameter.VAR_KEYWORD:
                    values.update(values.pop(name, {}))
            check_learner_parameters(type(self), values)
        init(self, *args, **kwargs)

    __init__._checks_parameters = True  # type: ignore[attr-defined]
    return __init__


def read_parameter(obj: Any, name: str) -> Any:
    """`obj`'s stored value of parameter `name` (never a wrapped learner's, which a wrapper's
    `__getattr__` would hand out), or a TypeError saying how to store it."""
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        pass
    raise TypeError(
        f"{type(obj).__name__}.__init__ takes {name!r}, but the learner has no attribute "
        f"{name!r}: store every constructor argument as given under its own name "
        f"(self.{name} = {name}), so get_params and clone can rebuild the learner"
    )
