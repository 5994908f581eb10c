"""The per-site accountant against dp-accounting called directly, its budget, calibration."""

import subprocess
import sys

import pytest

dp = pytest.importorskip("dp_accounting")

from cosmosfl.privacy.accountant import (  # noqa: E402
    RDP_ORDERS,
    Charge,
    SiteAccountant,
    calibrate,
    epsilon_of,
)
from cosmosfl.privacy.deps import PrivacyUnavailableError, require  # noqa: E402

DELTA = 1e-5


def direct_epsilon(events, delta=DELTA):
    accountant = dp.rdp.RdpAccountant(RDP_ORDERS)
    for event in events:
        accountant.compose(event)
    return accountant.get_epsilon(delta)


def test_epsilon_of_composes_like_dp_accounting():
    charges = [
        Charge("dpsgd", 1.3, sample_rate=0.25, steps=12),
        Charge("gaussian", 4.0),
        Charge("dpsgd", 1.3, sample_rate=0.25, steps=4),
    ]
    events = [
        dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(0.25, dp.GaussianDpEvent(1.3)), 12),
        dp.GaussianDpEvent(4.0),
        dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(0.25, dp.GaussianDpEvent(1.3)), 4),
    ]
    assert epsilon_of(charges, DELTA) == pytest.approx(direct_epsilon(events), rel=1e-9)
    pld = dp.pld.PLDAccountant()
    pld.compose(dp.ComposedDpEvent(events))
    assert epsilon_of(charges, DELTA, "pld") == pytest.approx(pld.get_epsilon(DELTA), rel=1e-9)


def test_budget_refuses_the_charge_that_would_exceed_it():
    charge = Charge("gaussian", 3.0)
    two = direct_epsilon([dp.GaussianDpEvent(3.0)] * 2)
    three = direct_epsilon([dp.GaussianDpEvent(3.0)] * 3)
    site = SiteAccountant((two + three) / 2, DELTA)
    assert site.try_spend(charge) and site.try_spend(charge)
    assert not site.try_spend(charge)  # the third would exceed the budget
    assert site.spent == pytest.approx(two) and site.refused == 1
    ledger = site.ledger(refused=True)
    assert ledger["privacy_fits"] == 2 and ledger["privacy_refused"] == 1
    assert ledger["privacy_epsilon"] <= ledger["privacy_budget"]


def test_state_round_trip_keeps_the_ledger():
    site = SiteAccountant(10.0, DELTA)
    site.try_spend(Charge("dpsgd", 1.0, sample_rate=0.1, steps=30))
    restored = SiteAccountant(10.0, DELTA)
    restored.set_state(site.get_state())
    assert restored.spent == site.spent and restored.charges == site.charges


@pytest.mark.parametrize("target", [1.0, 4.0, 16.0])
def test_calibration_fits_the_plan_into_the_budget(target):
    def plan(z):
        return [Charge("dpsgd", z, sample_rate=0.25, steps=8) for _ in range(5)]

    z = calibrate(plan, target, DELTA)
    assert epsilon_of(plan(z), DELTA) <= target * (1 + 1e-9)
    assert epsilon_of(plan(z * 0.97), DELTA) > target  # not much more noise than needed


def test_missing_package_names_the_extra():
    with pytest.raises(PrivacyUnavailableError, match=r"pip install 'cosmosfl\[privacy\]'"):
        require("cosmosfl_no_such_privacy_package")


def test_config_and_engines_import_without_the_privacy_packages():
    code = (
        "import sys, cosmosfl.experiment.config, cosmosfl.engines.simulation;"
        "print(sorted(m for m in ('opacus', 'dp_accounting') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
