"""Membership-inference statistics from an attacker's scores of members and non-members.

Neither TensorFlow Privacy's membership-inference module nor ML Privacy Meter installs here
without TensorFlow (both import it; TF Privacy also pins dp-accounting 0.4 and numpy 1.x), so
the standard statistics are computed directly:

- ROC AUC of member against non-member scores (scikit-learn's `roc_auc_score`);
- TPR at a low FPR (1 %, 0.1 %), the figure Carlini et al. 2022 ("Membership Inference
  Attacks From First Principles") argue matters;
- the empirical ε lower bound of Jagielski, Ullman & Oprea 2020 ("Auditing Differentially
  Private Machine Learning: How Private is Private SGD?") and Nasr et al. 2021 ("Adversary
  Instantiation: Lower Bounds for Differentially Private Machine Learning"): an (ε, δ)-DP
  mechanism gives every test TPR <= e^ε FPR + δ and TNR <= e^ε FNR + δ, so
  ε >= max(log((TPR - δ) / FPR), log((TNR - δ) / FNR)). TPR and TNR take their one-sided
  Clopper-Pearson lower bounds, FPR and FNR their upper bounds, each at (1 - confidence) / 2.
  The threshold is chosen as the best of all (as in both papers), which the intervals do not
  correct for: with few canaries, read the bound as indicative.
"""

from __future__ import annotations

import math

import numpy as np


def _scores(member: np.ndarray, nonmember: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m, n = np.asarray(member, dtype=np.float64), np.asarray(nonmember, dtype=np.float64)
    if not len(m) or not len(n):
        raise ValueError("need at least one member and one non-member score")
    return m, n


def roc_auc(member: np.ndarray, nonmember: np.ndarray) -> float:
    """Area under the ROC curve: the chance a member scores above a non-member."""
    from sklearn.metrics import roc_auc_score

    m, n = _scores(member, nonmember)
    labels = np.r_[np.ones(len(m)), np.zeros(len(n))]
    return float(roc_auc_score(labels, np.r_[m, n]))


def _counts(m: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every threshold "score >= t" (t over all scores, and +inf): members and
    non-members flagged."""
    thresholds = np.r_[np.unique(np.r_[m, n]), np.inf]
    tp = (m[None, :] >= thresholds[:, None]).sum(axis=1)
    fp = (n[None, :] >= thresholds[:, None]).sum(axis=1)
    return tp, fp


def tpr_at_fpr(member: np.ndarray, nonmember: np.ndarray, fpr: float) -> float:
    """The highest TPR of a threshold whose FPR is at most `fpr` (0 if only flagging nothing
    qualifies)."""
    m, n = _scores(member, nonmember)
    tp, fp = _counts(m, n)
    ok = fp / len(n) <= fpr
    return float((tp[ok] / len(m)).max())


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds (lower, upper) of a binomial rate from k of n, each
    holding with probability 1 - alpha."""
    from scipy.stats import beta

    lower = 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.ppf(1 - alpha, k + 1, n - k))
    return lower, upper


def empirical_epsilon(
    member: np.ndarray, nonmember: np.ndarray, delta: float = 0.0, confidence: float = 0.95
) -> float:
    """The ε lower bound (see the module doc); 0 when no threshold gives evidence."""
    m, n = _scores(member, nonmember)
    alpha = (1 - confidence) / 2
    best = 0.0
    tp, fp = _counts(m, n)
    for t, f in zip(tp, fp, strict=True):
        tpr_lo, _ = clopper_pearson(int(t), len(m), alpha)
        _, fpr_hi = clopper_pearson(int(f), len(n), alpha)
        tnr_lo, _ = clopper_pearson(len(n) - int(f), len(n), alpha)
        _, fnr_hi = clopper_pearson(len(m) - int(t), len(m), alpha)
        for num, den in ((tpr_lo - delta, fpr_hi), (tnr_lo - delta, fnr_hi)):
            if num > 0 and den > 0:
                best = max(best, math.log(num / den))
    return best


def attack_summary(
    member: np.ndarray, nonmember: np.ndarray, delta: float = 0.0
) -> dict[str, float]:
    """AUC, TPR at 1 % and 0.1 % FPR, the empirical ε lower bound, and the counts."""
    return {
        "auc": roc_auc(member, nonmember),
        "tpr_at_1pct_fpr": tpr_at_fpr(member, nonmember, 0.01),
        "tpr_at_0.1pct_fpr": tpr_at_fpr(member, nonmember, 0.001),
        "epsilon_lower_bound": empirical_epsilon(member, nonmember, delta),
        "members": float(len(member)),
        "nonmembers": float(len(nonmember)),
    }
