"""`check_algorithm`: conformance checks for an algorithm, yours or a shipped one."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from cosmosfl.algorithms.base import Algorithm
from cosmosfl.algorithms.registry import check_algorithm_class
from cosmosfl.core import protocol
from cosmosfl.core.constraints import (
    Constraint,
    Interval,
    Options,
    check_instance,
    check_parameters,
    constraints_of,
)
from cosmosfl.experiment.checkpoint import restore
from cosmosfl.handlers.base import handlers_for
from cosmosfl.testing._federation import (
    FederationFactory,
    Run,
    engine_for,
    fresh,
    run_in_process,
    run_on_flower,
    tiny_federation,
    without_timing,
)
from cosmosfl.testing._support import (
    CheckError,
    _disturb_global_rng,
    _Failed,
    _global_rng_restored,
    _Skipped,
    run_check,
)

ALGORITHM_CHECKS: tuple[str, ...] = (
    "declares_its_contract",
    "constraints_reject_bad_settings",
    "runs_on_simulation",
    "seeded_determinism",
    "checkpoint_round_trip",
    "runs_on_flower",
)
"""The names of `check_algorithm`'s checks, in the order they run."""

# A check whose prerequisite failed is skipped, not run into confusing failures.
_NEEDS: dict[str, tuple[str, ...]] = {
    "constraints_reject_bad_settings": ("declares_its_contract",),
    "runs_on_simulation": ("declares_its_contract",),
    "seeded_determinism": ("runs_on_simulation",),
    "checkpoint_round_trip": ("runs_on_simulation",),
    "runs_on_flower": ("runs_on_simulation",),
}


class AlgorithmCheckError(CheckError):
    """One or more checks failed; `failures` maps each check to its message, and `skipped`
    each check not run to why."""

    subject = "algorithm check(s)"


@dataclass
class AlgorithmCheckReport:
    """What `check_algorithm` ran: the checks that `passed`, and the `skipped` ones with why."""

    algorithm: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass
class _Context:
    template: Algorithm
    federation: FederationFactory
    seed: int
    rounds: int
    _reference: Run | None = None

    @property
    def cls(self) -> type[Algorithm]:
        return type(self.template)

    def reference(self) -> Run:
        """The run the other checks compare with, made once: `rounds` rounds in process, with
        a checkpoint after round 1."""
        if self._reference is None:
            self._reference = run_in_process(
                self.template, self.federation, self.seed, self.rounds, pause=True
            )
        return self._reference


def check_algorithm(
    algorithm: Algorithm,
    *,
    federation: FederationFactory | None = None,
    rounds: int = 2,
    seed: int = 0,
    checks: Sequence[str] | None = None,
) -> AlgorithmCheckReport:
    """Check that an algorithm honours what configs, engines, checkpoints and reports rely on.

    `algorithm` is an instance with the settings to check (small epochs keep it fast); each
    run starts from a copy of it. `federation` builds a fresh federation from a seed, `seed ->
    (clients, public_x)`; by default four torch mlp clients on synthetic feature vectors
    (`tiny_federation`). `checks` picks some of `ALGORITHM_CHECKS` (e.g. one per test case).

    Checks: the class is a registrable `Algorithm` dataclass, its client handlers resolve and
    its constraints name settings of their type (`declares_its_contract`); every constraint's
    bad values make the constructor raise ValueError with the config layer's message, and the
    given settings pass (`constraints_reject_bad_settings`); `rounds` rounds run on the
    in-process engine, with the reported model measured for every client, no refused reply,
    and no parameter task sent by a model-agnostic algorithm (`runs_on_simulation`); the same
    seed gives the same records whatever the global random state (`seeded_determinism`);
    resuming from the checkpoint after round 1 gives the uninterrupted run's records
    (`checkpoint_round_trip`); the Flower engine, over an in-process Grid and the real codec,
    gives the in-process accuracies (`runs_on_flower`; skipped without Flower installed).

    Raises AlgorithmCheckError listing every failed (and skipped) check; returns an
    AlgorithmCheckReport.
    """
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"check_algorithm takes an Algorithm instance, got {algorithm!r}")
    if rounds < 2:
        raise ValueError(
            f"rounds must be >= 2 (the checkpoint is taken after round 1), got {rounds}"
        )
    chosen = list(ALGORITHM_CHECKS if checks is None else checks)
    unknown = sorted(set(chosen) - set(ALGORITHM_CHECKS))
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; allowed: {', '.join(ALGORITHM_CHECKS)}")
    name = type(algorithm).__name__
    context = _Context(algorithm, federation or tiny_federation, seed, rounds)
    report = AlgorithmCheckReport(name)
    failures: dict[str, str] = {}
    blocked: dict[str, str] = {}
    with _global_rng_restored():
        for check in ALGORITHM_CHECKS:
            if check not in chosen:
                continue
            run_check(
                check,
                lambda check=check: _CHECKS[check](context),
                _NEEDS.get(check, ()),
                failures,
                blocked,
                report,
            )
    report.skipped.update(blocked)
    if failures:
        raise AlgorithmCheckError(name, failures, blocked)
    return report


def _declares_its_contract(ctx: _Context) -> None:
    try:
        check_algorithm_class(ctx.cls)
        handlers_for(ctx.cls)
    except (TypeError, ValueError, ImportError, AttributeError) as err:
        raise _Failed(str(err)) from None
    hints = typing.get_type_hints(ctx.cls)
    settings = {f.name for f in dataclasses.fields(ctx.cls) if f.init}
    for key, constraint in constraints_of(ctx.cls).items():
        if key not in settings:
            raise _Failed(f"parameter_constraints names {key!r}, which is not a setting (field)")
        types = set(typing.get_args(hints[key]) or (hints[key],))
        kind = str if isinstance(constraint, Options) else getattr(constraint, "kind", None)
        if kind is not None and kind not in types:
            declared = getattr(hints[key], "__name__", hints[key])
            raise _Failed(f"{key} is declared {declared} but constrained as {kind.__name__}")
        if isinstance(constraint, Interval) and (type(None) in types) != (
            constraint.none is not None
        ):
            raise _Failed(
                f"{key}: its type {hints[key]} and its constraint disagree on None (an Interval "
                "allows None only with none='what None means')"
            )


def _bad_values(constraint: Constraint) -> Iterator[Any]:
    """Values the constraint refuses: out of range, NaN, None where None means nothing, an
    unknown option."""
    if isinstance(constraint, Options):
        yield from ("no-such-option", None)
        return
    if not isinstance(constraint, Interval):
        return
    step = 1 if constraint.kind is int else 0.5
    if constraint.low is not None:
        yield constraint.kind(constraint.low - step)
    if constraint.high is not None:
        yield constraint.kind(constraint.high + step)
    if constraint.kind is float:
        yield math.nan
    if constraint.none is None:
        yield None


def _constraints_reject_bad_settings(ctx: _Context) -> None:
    cls = ctx.cls
    try:
        check_instance(ctx.template)
        cls(**ctx.template.hyperparameters())
    except (TypeError, ValueError) as err:
        raise _Failed(f"the settings given to check_algorithm are refused: {err}") from None
    constraints = constraints_of(cls)
    if not constraints:
        raise _Skipped("the class declares no parameter_constraints")
    for key, constraint in constraints.items():
        for value in _bad_values(constraint):
            expected = constraint.error(key, value)
            if expected is None:
                continue
            try:
                cls(**{key: value})
            except (TypeError, ValueError) as err:
                if str(err) != expected:
                    raise _Failed(
                        f"{cls.__name__}({key}={value!r}) raised {err!r}; expected the "
                        f"constraint's message {expected!r} (call super().__post_init__() first)"
                    ) from None
            else:
                raise _Failed(f"{cls.__name__}({key}={value!r}) was accepted: {expected}")
            try:
                check_parameters(cls, {key: value})  # what the config layer runs first
            except ValueError as err:
                if str(err) != expected:
                    raise _Failed(
                        f"the config layer says {err}, the constraint {expected}"
                    ) from None
            else:
                raise _Failed(f"the config layer accepted {key}={value!r}: {expected}")


def _runs_on_simulation(ctx: _Context) -> None:
    run = ctx.reference()
    reported = ctx.cls.reported_model
    clients = {str(cid) for cid in run.client_ids}
    if len(run.records) != ctx.rounds:
        raise _Failed(f"{ctx.rounds} rounds gave {len(run.records)} records")
    for record in run.records:
        measured = record.get("accuracy", {}).get(reported)
        if measured is None or set(measured) != clients:
            raise _Failed(
                f"round {record.get('round')}: the reported model {reported!r} is measured "
                f"for clients {sorted(measured or {})}, expected {sorted(clients)} (models "
                f"measured: {sorted(record.get('accuracy', {}))})"
            )
        if not all(0.0 <= float(v) <= 1.0 for v in measured.values()):
            raise _Failed(f"round {record['round']}: accuracies outside [0, 1]: {measured}")
    sent = run.tasks & set(protocol.PARAMETER_TASKS)
    if ctx.cls.model_agnostic and sent:
        raise _Failed(
            f"model_agnostic is True but the algorithm sent {sorted(sent)} (model parameters); "
            "set model_agnostic = False for a parameter-sharing algorithm"
        )


def _seeded_determinism(ctx: _Context) -> None:
    _disturb_global_rng(1)
    again = run_in_process(ctx.template, ctx.federation, ctx.seed, ctx.rounds, pause=False)
    _same_records(ctx.reference().records, again.records, "a second run with the same seed")


def _checkpoint_round_trip(ctx: _Context) -> None:
    reference = ctx.reference()
    assert reference.checkpoint is not None
    clients, public_x = ctx.federation(ctx.seed)
    algorithm = fresh(ctx.template)
    with torch.random.fork_rng(devices=[]):
        saved = restore(reference.checkpoint, algorithm, clients)
        engine = engine_for(clients, public_x, ctx.seed)
        resumed = [engine.run_round(algorithm, t, ctx.rounds) for t in range(2, ctx.rounds + 1)]
        engine.close()
    _same_records(reference.records, saved + resumed, "resuming from the round-1 checkpoint")


def _runs_on_flower(ctx: _Context) -> None:
    if importlib.util.find_spec("flwr") is None:
        raise _Skipped("Flower is not installed (pip install cosmosfl[flower])")
    records = run_on_flower(ctx.template, ctx.federation, ctx.seed, ctx.rounds)
    for ours, theirs in zip(ctx.reference().records, records, strict=True):
        for key in ("accuracy", "clusters"):
            a, b = ours.get(key), theirs.get(key)
            if key == "accuracy" and a is not None and b is not None:
                same = a.keys() == b.keys() and all(
                    a[m].keys() == b[m].keys()
                    and np.allclose(list(a[m].values()), list(b[m].values()), atol=1e-9)
                    for m in a
                )
            else:
                same = a == b
            if not same:
                raise _Failed(
                    f"round {ours['round']}: {key} on Flower {b} differs from in process {a}"
                )


def _same_records(expected: list[dict], got: list[dict], what: str) -> None:
    for a, b in zip(without_timing(expected), without_timing(got), strict=True):
        if a != b:
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            raise _Failed(
                f"{what} gave other records: round {a.get('round')} differs in {keys} "
                f"(e.g. {keys[0]}: {a.get(keys[0])!r} vs {b.get(keys[0])!r}); draw randomness "
                "from fed.seed (cosmosfl.core.seeds.derive_seed) and keep all state that "
                "changes in get_state / set_state"
            )


_CHECKS: dict[str, Callable[[_Context], None]] = {
    "declares_its_contract": _declares_its_contract,
    "constraints_reject_bad_settings": _constraints_reject_bad_settings,
    "runs_on_simulation": _runs_on_simulation,
    "seeded_determinism": _seeded_determinism,
    "checkpoint_round_trip": _checkpoint_round_trip,
    "runs_on_flower": _runs_on_flower,
}
