"""Loading a comparison folder's runs (experiment/runset.py): what counts as finished, and the
order, role and name each algorithm is shown with."""

import pytest

from cosmosfl.algorithms import ALGORITHMS
from cosmosfl.experiment.config import ConfigError
from cosmosfl.reporting.runset import algorithm_order, display_name, load_runs, role

from .test_report import COSMOS_FINAL, FEDMD_FINAL, baseline_runs, cosmos_runs


def test_finished_runs_by_algorithm_in_report_order_and_by_seed(tmp_path):
    baseline_runs(tmp_path, "local", COSMOS_FINAL)
    baseline_runs(tmp_path, "fedmd", FEDMD_FINAL)
    cosmos_runs(tmp_path)
    (tmp_path / "fedmd" / "seed9").mkdir()  # started, never finished
    runset = load_runs(tmp_path)
    assert list(runset.runs) == ["cosmos", "fedmd", "local"]
    assert [r.seed for r in runset.runs["fedmd"]] == [1, 2, 3]
    assert runset.unfinished == [tmp_path / "fedmd" / "seed9"]
    with pytest.raises(ConfigError, match="no finished runs"):
        load_runs(tmp_path / "local" / "seed1")


def test_order_and_roles():
    names = ["centralized", "local", "fedavg", "comet", "cosmos", "zzz"]
    assert algorithm_order(names) == ["cosmos", "comet", "fedavg", "zzz", "local", "centralized"]
    assert [role(n) for n in ("cosmos", "fedmd", "local", "centralized")] == [
        "proposed",
        "baseline",
        "reference",
        "reference",
    ]


def test_display_names_come_from_the_classes():
    assert display_name("cosmos") == "COSMOS" and display_name("pfedck") == "pFedCK"
    assert display_name("pfedhn") == "pFedHN (modified server step)"
    assert display_name("centralized") == "centralized" and display_name("local") == "local"
    assert display_name("not-registered") == "not-registered"
    for name, cls in ALGORITHMS.items():
        assert display_name(name) == cls.display_name


def test_roles_come_from_the_classes():
    """`reference` on a class (Local, Centralized) makes a reference: a registered algorithm
    that declares it is reported after the baselines, without a list to edit."""
    from dataclasses import dataclass
    from typing import ClassVar

    from cosmosfl.algorithms import Local, register_algorithm, unregister_algorithm

    assert ALGORITHMS["local"].reference and not ALGORITHMS["fedavg"].reference

    @dataclass
    class Oracle(Local):
        name: ClassVar[str] = "oracle"

    @dataclass
    class Mine(Local):
        name: ClassVar[str] = "mine"
        reference: ClassVar[bool] = False

    register_algorithm(Oracle)
    register_algorithm(Mine)
    try:
        assert role("oracle") == "reference" and role("mine") == "baseline"
        names = ["centralized", "oracle", "mine", "local", "fedavg", "cosmos"]
        assert algorithm_order(names) == [
            "cosmos",
            "fedavg",
            "mine",
            "local",
            "oracle",
            "centralized",
        ]
    finally:
        unregister_algorithm("oracle")
        unregister_algorithm("mine")
