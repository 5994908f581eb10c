"""COSMOS's round as numbered steps: the teacher f̄_k is a step of its own (3a), and the code
and docs/cosmos.md number the steps alike."""

import contextlib
import inspect
import re
from types import SimpleNamespace

import numpy as np
import pytest

from cosmosfl.algorithms import cosmos as cosmos_module
from cosmosfl.algorithms.cosmos import Cosmos


def _federation() -> SimpleNamespace:
    lines: list[str] = []
    return SimpleNamespace(
        client_ids=[0, 1, 2, 3],
        seed=0,
        log=lines.append,
        lines=lines,
        phase=lambda name: contextlib.nullcontext(),
    )


def _pseudo_labels(seed: int) -> np.ndarray:
    p = np.random.default_rng(seed).random((6, 3)) + 0.1
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_the_teacher_is_the_mean_of_the_members_that_answered_at_temperature_t(temperature):
    algo = Cosmos(temperature=temperature)
    algo.membership.assignment = {0: 0, 1: 0, 2: 1, 3: 2}
    probs = {0: _pseudo_labels(0), 1: _pseudo_labels(1), 2: _pseudo_labels(2)}  # 3: no answer
    fed = _federation()
    teachers = algo._cluster_teachers(fed, probs)
    assert sorted(teachers) == [0, 1]  # cluster 2's only member did not answer: no teacher
    assert any("cluster 2" in line for line in fed.lines)
    sharpened = ((probs[0] + probs[1]) / 2) ** (1 / temperature)
    np.testing.assert_allclose(
        teachers[0], sharpened / sharpened.sum(axis=1, keepdims=True), rtol=1e-5
    )
    single = probs[2] ** (1 / temperature)
    np.testing.assert_allclose(teachers[1], single / single.sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_robust_aggregation_makes_a_different_teacher():
    probs = {c: _pseudo_labels(c) for c in range(3)}
    fed = _federation()
    by = {}
    for rule in ("mean", "median"):
        algo = Cosmos(aggregation=rule)
        algo.membership.assignment = {0: 0, 1: 0, 2: 0}
        by[rule] = algo._cluster_teachers(fed, probs)[0]
    np.testing.assert_allclose(by["mean"], np.mean([probs[c] for c in range(3)], axis=0), 1e-5)
    assert not np.allclose(by["mean"], by["median"])


STEP = re.compile(r"\((\d[ab]?)\)")


def test_code_and_docs_number_the_steps_alike(repo_root):
    docstring = re.findall(r"^\s+\((\d[ab]?)\) ", cosmos_module.__doc__ or "", flags=re.MULTILINE)
    run_round = inspect.getsource(Cosmos.run_round)
    in_round = [m for line in run_round.splitlines() if "# (" in line for m in STEP.findall(line)]
    docs = (repo_root / "docs" / "cosmos.md").read_text(encoding="utf-8")
    section = docs.split("## One round, step by step")[1].split("\n## ")[0]
    table = re.findall(r"^\| (\d[ab]?) ", section, flags=re.MULTILINE)
    steps = ["1", "2", "3a", "3b", "4", "5"]
    assert docstring == steps
    assert table == steps
    # run_round calls every step in order (step 1 twice: training, then its pseudo-labels).
    assert in_round == ["1", *steps]
    # Each step's method says which step it is, in the words of the docs.
    for step, method in [
        ("1", Cosmos._local_training),
        ("2", Cosmos._clustering),
        ("3a", Cosmos._cluster_teachers),
        ("3b", Cosmos._server_distillation),
        ("4", Cosmos._client_distillation),
        ("5", Cosmos._deploy),
    ]:
        assert (method.__doc__ or "").startswith(f"Step {step}")
        assert f"`{method.__name__}`" in section
