"""The config's `privacy` section: a site's budget and the mechanism that keeps to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosmosfl.core.constraints import Interval, Options, Rule
from cosmosfl.privacy.accountant import ACCOUNTANTS

# "auto": DP-SGD for torch learners, subsample-and-aggregate for any other.
MECHANISMS = ("auto", "dpsgd", "subsample-aggregate")


@dataclass
class PrivacyConfig:
    parameter_constraints: ClassVar = {
        "epsilon": Interval(float, 0, closed="neither", none="no budget, no privacy"),
        "delta": Interval(float, 0, 1, closed="neither", note="e.g. 1e-5, below 1/records"),
        "mechanism": Options(MECHANISMS),
        "noise_multiplier": Interval(float, 0, closed="neither", none="calibrated to epsilon"),
        "max_grad_norm": Interval(float, 0, closed="neither"),
        "shards": Interval(int, 2),
        "accountant": Options(ACCOUNTANTS),
        "require_epsilon": Interval(float, 0, closed="neither", none="no requirement"),
        "student_epochs": Interval(int, 1),
    }
    parameter_rules: ClassVar = [
        Rule(
            lambda p: (
                p.require_epsilon is None or p.epsilon is None or p.epsilon <= p.require_epsilon
            ),
            lambda p: (
                f"privacy.epsilon = {p.epsilon!r} does not meet privacy.require_epsilon = "
                f"{p.require_epsilon!r}: set privacy.epsilon to at most {p.require_epsilon!r}"
            ),
        ),
    ]
    # Every site's budget for the whole run: ε at δ over all its fits on private records
    # (docs/privacy.md). None: no differential privacy (unless noise_multiplier is set).
    epsilon: float | None = None
    delta: float = 1e-5
    mechanism: str = "auto"  # auto | dpsgd | subsample-aggregate
    # None: calibrated so the run's planned fits spend exactly the budget. Set: that noise,
    # with the budget (if any) still enforced by refusing fits.
    noise_multiplier: float | None = None
    max_grad_norm: float = 1.0  # DP-SGD: per-sample gradient clipping norm C
    shards: int = 5  # subsample-and-aggregate: disjoint shards (teachers) per site
    student_epochs: int = 10  # subsample-and-aggregate: the student's epochs on each release
    accountant: str = "rdp"  # rdp | pld (dp-accounting)
    # The run's minimum guarantee: every site's epsilon must be at most this. Sites mode: a
    # site whose own budget is larger (or unset) is refused; partition mode: `epsilon`.
    require_epsilon: float | None = None

    @property
    def enabled(self) -> bool:
        """Whether clients train under differential privacy."""
        return self.epsilon is not None or self.noise_multiplier is not None
