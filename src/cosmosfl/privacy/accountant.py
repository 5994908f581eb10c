"""One privacy accountant per site: each fit of its learner on private records is one
differentially private event, composed with Google's dp-accounting.

A fit is described by a `Charge` (plain data, so a checkpoint holds the ledger) and turned into
a dp-accounting `DpEvent` only when ε is computed: DP-SGD's fit is `steps` Poisson-subsampled
Gaussian steps (Abadi et al. 2016, the event Opacus accounts); a subsample-and-aggregate
release is one Gaussian mechanism on the vote histogram. The accountant composes every charge
of the site — RDP (Mironov 2017) by default, or privacy-loss distributions (PLD) — and refuses
a charge that would take the site past its budget, before the fit runs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from cosmosfl.privacy.deps import require

ACCOUNTANTS = ("rdp", "pld")
# Rényi orders from 2 (quarter steps to 12, then integers): below 2 the sampled Gaussian's
# series often fails to converge at the sampling rates of small sites (dp-accounting then drops
# the order after 1,000 slow iterations); from 2 on, ε is within 0.2 % of Opacus's full grid.
RDP_ORDERS = (*(x / 4 for x in range(8, 48)), *range(12, 65), 80, 96, 128, 192, 256, 512, 1024)
# Calibration searches with integer orders only (closed forms, ~50x faster): a coarser grid can
# only overstate ε, so the noise it finds keeps the plan within budget on the full grid.
CALIBRATION_ORDERS = (*range(2, 33), 40, 48, 64, 128, 256)
# Prefix of the scalars a private learner adds to its fit's metrics; the engines copy them
# into the round record's `privacy` entry (engines/base.py).
LEDGER_PREFIX = "privacy_"


@dataclass(frozen=True)
class Charge:
    """One private fit. `mechanism`: "dpsgd" (`steps` steps of the sampled Gaussian with
    `sample_rate` and `noise_multiplier`) or "gaussian" (one release, noise σ / sensitivity =
    `noise_multiplier`)."""

    mechanism: str
    noise_multiplier: float
    sample_rate: float = 1.0
    steps: int = 1

    def event(self) -> Any:
        """The dp-accounting event of this charge."""
        dp = require("dp_accounting")
        gaussian = dp.GaussianDpEvent(self.noise_multiplier)
        if self.mechanism == "gaussian":  # `steps` releases
            return gaussian if self.steps == 1 else dp.SelfComposedDpEvent(gaussian, self.steps)
        if self.mechanism == "dpsgd":
            step = dp.PoissonSampledDpEvent(self.sample_rate, gaussian)
            return dp.SelfComposedDpEvent(step, self.steps)
        raise ValueError(f"unknown mechanism {self.mechanism!r}; allowed: dpsgd, gaussian")


@contextmanager
def _quiet_orders() -> Iterator[None]:
    """dp-accounting logs (through absl) every fractional RDP order whose series does not
    converge; it leaves that order out, which only makes ε larger (safe): not the user's news."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def make_accountant(method: str, orders: Sequence[float] = RDP_ORDERS) -> Any:
    """A fresh dp-accounting accountant: "rdp" (at `orders`) or "pld"."""
    dp = require("dp_accounting")
    if method == "rdp":
        return dp.rdp.RdpAccountant(list(orders))
    if method == "pld":
        return dp.pld.PLDAccountant()
    raise ValueError(f"privacy.accountant = {method!r} is not allowed; allowed: rdp, pld")


def epsilon_of(charges: Sequence[Charge], delta: float, method: str = "rdp") -> float:
    """ε at `delta` of all `charges` composed (0 for none)."""
    if not charges:
        return 0.0
    dp = require("dp_accounting")
    accountant = make_accountant(method)
    with _quiet_orders():
        accountant.compose(dp.ComposedDpEvent([c.event() for c in merged(charges)]))
        return float(accountant.get_epsilon(delta))


def merged(charges: Sequence[Charge]) -> list[Charge]:
    """The same composition with charges of one mechanism, rate and noise merged (their steps
    added): one self-composed event each, which the accountants compute once, not per fit."""
    steps: dict[tuple[str, float, float], int] = {}
    for c in charges:
        key = (c.mechanism, c.sample_rate, c.noise_multiplier)
        steps[key] = steps.get(key, 0) + c.steps
    return [Charge(m, z, sample_rate=q, steps=n) for (m, q, z), n in steps.items()]


def calibrate(
    charge_for: Callable[[float], Sequence[Charge]],
    epsilon: float,
    delta: float,
    method: str = "rdp",
) -> float:
    """The smallest noise multiplier z such that the charges `charge_for(z)` (a whole run's
    fits) compose to at most `epsilon` at `delta` (dp-accounting's calibration search, on
    `CALIBRATION_ORDERS` for RDP: z may be a few % larger than the full grid needs)."""
    dp = require("dp_accounting")
    bracket = dp.mechanism_calibration.ExplicitBracketInterval(1e-3, 1e4)

    def event(z: float) -> Any:
        return dp.ComposedDpEvent([c.event() for c in merged(charge_for(z))])

    with _quiet_orders():
        z = dp.calibrate_dp_mechanism(
            lambda: make_accountant(method, CALIBRATION_ORDERS),
            event,
            epsilon,
            delta,
            bracket_interval=bracket,
            tol=1e-4,
        )
    return float(z)


class SiteAccountant:
    """A site's ledger of private fits and its budget (ε at δ for the whole run; None: no
    budget, ε is only reported). Shared by every learner of the site (its model slots too)."""

    def __init__(self, epsilon: float | None, delta: float, method: str = "rdp") -> None:
        if method not in ACCOUNTANTS:
            raise ValueError(f"privacy.accountant = {method!r} is not allowed; allowed: rdp, pld")
        self.budget = epsilon
        self.delta = float(delta)
        self.method = method
        self.charges: list[Charge] = []
        self.refused = 0
        self._spent = 0.0
        self._last: float = 0.0  # ε added by the last accepted charge

    @property
    def spent(self) -> float:
        """ε at δ of every accepted charge, composed."""
        return self._spent

    def try_spend(self, charge: Charge) -> bool:
        """Add `charge` if the site stays within its budget; False (nothing added, the fit must
        not run) if it would not."""
        after = epsilon_of([*self.charges, charge], self.delta, self.method)
        if self.budget is not None and after > self.budget * (1 + 1e-9):
            self.refused += 1
            self._last = 0.0
            return False
        self.charges.append(charge)
        self._last, self._spent = after - self._spent, after
        return True

    def ledger(self, refused: bool) -> dict[str, float]:
        """The scalars a fit reports (`privacy_*`): ε spent so far, by this fit, the budget,
        δ, fits accepted and whether this one was refused."""
        out = {
            "epsilon": self._spent,
            "epsilon_fit": self._last,
            "delta": self.delta,
            "fits": float(len(self.charges)),
            "refused": float(refused),
        }
        if self.budget is not None:
            out["budget"] = float(self.budget)
        return {LEDGER_PREFIX + k: v for k, v in out.items()}

    def get_state(self) -> dict[str, Any]:
        return {
            "charges": [asdict(c) for c in self.charges],
            "refused": self.refused,
            "spent": self._spent,
            "last": self._last,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.charges = [Charge(**c) for c in state["charges"]]
        self.refused = int(state["refused"])
        self._spent = float(state["spent"])
        self._last = float(state["last"])


def ledger_of(metrics: dict[str, float]) -> dict[str, float]:
    """The `privacy_*` scalars of a reply's metrics, without the prefix ({} if none)."""
    n = len(LEDGER_PREFIX)
    return {
        k[n:]: float(v)
        for k, v in metrics.items()
        if k.startswith(LEDGER_PREFIX) and math.isfinite(float(v))
    }
