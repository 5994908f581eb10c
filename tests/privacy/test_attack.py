"""Membership-inference statistics against their closed forms."""

import math

import numpy as np
import pytest

from cosmosfl.privacy.attack import (
    attack_summary,
    clopper_pearson,
    empirical_epsilon,
    roc_auc,
    tpr_at_fpr,
)


def test_perfectly_separated_scores():
    n = 50
    member, nonmember = np.arange(n) + 100.0, np.arange(n) * 1.0
    assert roc_auc(member, nonmember) == 1.0
    assert tpr_at_fpr(member, nonmember, 0.001) == 1.0
    # Best threshold: all members flagged, no non-member. One-sided 97.5 % Clopper-Pearson
    # bounds for n of n and 0 of n are 0.025^(1/n) and 1 - 0.025^(1/n).
    lo = 0.025 ** (1 / n)
    assert empirical_epsilon(member, nonmember) == pytest.approx(math.log(lo / (1 - lo)))


def test_indistinguishable_scores_give_no_evidence():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=400)
    member, nonmember = scores[:200], scores[200:]
    assert abs(roc_auc(member, nonmember) - 0.5) < 0.1
    assert empirical_epsilon(member, nonmember) < 0.3
    assert empirical_epsilon(member, member.copy()) == 0.0


def test_tpr_at_fpr_uses_only_thresholds_within_the_fpr():
    member = np.array([5.0, 4.0, 3.0, 0.5])
    nonmember = np.array([4.5, 1.0, 0.0, -1.0])
    assert tpr_at_fpr(member, nonmember, 0.0) == 0.25  # above 4.5: one member
    assert tpr_at_fpr(member, nonmember, 0.25) == 0.75  # above 1.0, one non-member allowed


def test_clopper_pearson_matches_the_beta_quantiles():
    from scipy.stats import beta

    lo, hi = clopper_pearson(7, 20, 0.05)
    assert lo == pytest.approx(beta.ppf(0.05, 7, 14)) and hi == pytest.approx(beta.ppf(0.95, 8, 13))
    assert clopper_pearson(0, 10, 0.05)[0] == 0.0 and clopper_pearson(10, 10, 0.05)[1] == 1.0


def test_summary_counts_and_delta_lowers_the_bound():
    member, nonmember = np.arange(30) + 40.0, np.arange(30) * 1.0
    summary = attack_summary(member, nonmember)
    assert summary["members"] == 30 and summary["nonmembers"] == 30
    assert (
        attack_summary(member, nonmember, delta=0.1)["epsilon_lower_bound"]
        < summary["epsilon_lower_bound"]
    )
