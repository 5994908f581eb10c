"""The algorithm registry (algorithms/registry.py): shipped algorithms, `register_algorithm`
from Python, and the `cosmosfl.algorithms` entry-point group of installed packages."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from cosmosfl.algorithms import (
    ALGORITHMS,
    Algorithm,
    Cosmos,
    Local,
    algorithm_class,
    register_algorithm,
    unregister_algorithm,
)
from cosmosfl.algorithms.base import RoundRecord, evaluate_clients
from cosmosfl.algorithms.registry import ENTRY_POINT_GROUP, RESERVED_NAMES
from cosmosfl.experiment.config import ConfigError, reference_runs, validate_algorithm


@dataclass
class Echo(Algorithm):
    """Evaluates the clients, nothing else."""

    name: ClassVar[str] = "echo"
    rounds_seen: int = 0

    def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
        record = RoundRecord()
        record.add_metrics("client_model", evaluate_clients(fed))
        return record


@pytest.fixture
def echo():
    register_algorithm(Echo)
    yield Echo
    unregister_algorithm(Echo.name)


def test_the_shipped_algorithms_come_first_in_registry_order():
    assert list(ALGORITHMS)[:5] == ["cosmos", "local", "fedmd", "fedct", "comet"]
    assert ALGORITHMS["cosmos"] is Cosmos and "local" in ALGORITHMS.shipped
    assert dict(ALGORITHMS)["local"] is Local


def test_a_registered_algorithm_is_known_to_configs_until_it_is_unregistered(echo):
    assert ALGORITHMS["echo"] is Echo and algorithm_class("echo") is Echo
    assert validate_algorithm({"name": "echo", "rounds_seen": 2}) == {
        "name": "echo",
        "rounds_seen": 2,
    }
    assert register_algorithm(Echo) is Echo  # the same class again: nothing happens
    unregister_algorithm("echo")
    assert "echo" not in ALGORITHMS
    with pytest.raises(ConfigError, match=r"algorithm\.name = 'echo' is not known"):
        validate_algorithm({"name": "echo"})
    register_algorithm(Echo)  # for the fixture to remove


def test_register_algorithm_is_a_decorator_and_another_class_needs_overwrite(echo):
    @dataclass
    class Other(Echo):
        pass

    with pytest.raises(ValueError, match=r"'echo' is already registered .*overwrite=True"):
        register_algorithm(Other)
    assert register_algorithm(Other, overwrite=True) is Other and ALGORITHMS["echo"] is Other


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: Cosmos(), TypeError, "must be a subclass of Algorithm"),
        (lambda: int, TypeError, "must be a subclass of Algorithm"),
        (lambda: type("Plain", (Echo,), {"name": "plain"}), None, None),
        (lambda: dataclass(type("Dotted", (Echo,), {"name": "my.algo"})), ValueError, "letters"),
        (lambda: dataclass(type("Spaced", (Echo,), {"name": "a b"})), ValueError, "letters"),
        (lambda: dataclass(type("Ref", (Echo,), {"name": "centralized"})), ValueError, "reference"),
        (lambda: dataclass(type("Mine", (Echo,), {"name": "cosmos"})), ValueError, "shipped"),
        (lambda: dataclass(type("NoName", (Algorithm,), {})), TypeError, "abstract"),
    ],
)
def test_what_cannot_be_registered_is_refused_with_the_reason(make, error, message):
    cls = make()
    if error is None:  # a subclass of a dataclass is one: registering it works
        register_algorithm(cls)
        unregister_algorithm(cls.name)
        return
    with pytest.raises(error, match=message):
        register_algorithm(cls)


def test_a_class_that_is_not_a_dataclass_is_refused():
    class Bare(Algorithm):
        name: ClassVar[str] = "bare"

        def run_round(self, fed, round_num):  # type: ignore[no-untyped-def]
            return RoundRecord()

    with pytest.raises(TypeError, match="must be a @dataclass"):
        register_algorithm(Bare)


def test_shipped_algorithms_cannot_be_removed_and_unknown_names_are_named():
    with pytest.raises(ValueError, match="shipped"):
        unregister_algorithm("cosmos")
    with pytest.raises(ValueError, match="'never' is not registered"):
        unregister_algorithm("never")
    with pytest.raises(ValueError, match="'never' is not known; allowed: comet, cosmos"):
        algorithm_class("never")


def test_the_reserved_names_are_the_reference_runs():
    assert set(RESERVED_NAMES) == set(reference_runs())


PLUGIN = """
from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.algorithms.base import Algorithm, RoundRecord, evaluate_clients


@dataclass
class Plugged(Algorithm):
    name: ClassVar[str] = "plugged"

    def run_round(self, fed, round_num):
        record = RoundRecord()
        record.add_metrics("client_model", evaluate_clients(fed))
        return record
"""


def write_plugin(root: Path, entry_points: str, module: str = PLUGIN) -> Path:
    """A distribution as pip installs one: the module and its dist-info with entry points."""
    (root / "plugged_algos.py").write_text(textwrap.dedent(module))
    info = root / "plugged_algos-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged-algos\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")
    return root


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a plugin distribution for this test only; the registry reads entry points anew."""

    def install(entry_points: str) -> None:
        monkeypatch.syspath_prepend(str(write_plugin(tmp_path, entry_points)))
        monkeypatch.setattr(ALGORITHMS, "_plugins_loaded", False)
        monkeypatch.setattr(ALGORITHMS, "broken", {})

    yield install
    sys.modules.pop("plugged_algos", None)
    if "plugged" in ALGORITHMS._classes:
        unregister_algorithm("plugged")


def test_an_installed_entry_point_registers_its_algorithm_on_first_read(installed):
    installed("plugged = plugged_algos:Plugged")
    assert "plugged" in ALGORITHMS and algorithm_class("plugged").__module__ == "plugged_algos"
    assert validate_algorithm({"name": "plugged"}) == {"name": "plugged"}


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("plugged = plugged_algos:Missing", "AttributeError"),
        ("plugged = no_such_module:Plugged", "ModuleNotFoundError"),
        ("renamed = plugged_algos:Plugged", "not the entry point's name 'renamed'"),
    ],
)
def test_a_broken_entry_point_is_left_out_with_a_warning_and_the_others_still_run(
    installed, entry, why
):
    installed(entry)
    with pytest.warns(RuntimeWarning, match=f"entry point .* did not load .*{why}"):
        assert "cosmos" in ALGORITHMS
    name = entry.split(" = ")[0]
    assert name not in ALGORITHMS
    with pytest.raises(ValueError, match=f"'{name}' is not known \\(its entry point did not load"):
        algorithm_class(name)
