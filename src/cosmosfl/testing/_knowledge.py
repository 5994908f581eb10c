"""The checks that a learner *gains* from distillation, not only runs it: distill with the
consistency term (lam > 0) on its own kind of input, uses the soft mass of the targets (not only
their argmax), and keeps what it distilled through the next `fit`."""

from __future__ import annotations

from typing import Any

import numpy as np

from cosmosfl.testing._support import _Data, _Failed, _fitted, _kl, _shifted_targets, _Skipped

# COSMOS's default lambda (the paper's): the weight of the consistency term r_B in distill.
LAM = 5.0
# The smallest change of the mean probability of a class that counts as "measurably moved".
MOVED = 1e-4


def _check_distill_with_consistency(make, data: _Data, *, seed: int, epochs: int, **_: Any) -> None:
    learner = _fitted(make, data, seed, epochs)
    targets = _shifted_targets(learner.predict_proba(data.public))
    try:
        learner.distill(data.public, targets, epochs=1, lam=LAM)
    except Exception as err:
        raise _Failed(
            f"distill(x, targets, lam={LAM}) raised {type(err).__name__}: {err}. COSMOS "
            f"distils with lam={LAM} by default: the consistency term r_B compares predictions "
            "on x with predictions on neighbours of x, so the learner's neighbour function must "
            f"fit these inputs (shape {tuple(data.public.shape[1:])}). Give it one that does "
            "(TorchLearner(..., augmentation=...), e.g. Gaussian noise for feature vectors), "
            "or run the federation with lam=0"
        ) from None
    probs = learner.predict_proba(data.public)
    if not np.isfinite(probs).all():
        raise _Failed(
            f"after distill(..., lam={LAM}) predict_proba returns NaN or inf: the consistency "
            "term made training diverge; lower the learning rate or lam"
        )


def _targets(base: np.ndarray, soft: bool) -> tuple[np.ndarray, np.ndarray]:
    """Targets whose argmax is the class after each row's predicted one, and the index of a
    second class: 'sharp' puts 0.96 on the argmax, 'soft' 0.55 on it and 0.40 on the second."""
    n, m = base.shape
    rows, first = np.arange(n), (base.argmax(axis=1) + 1) % m
    second = (first + 1) % m
    rest = max(m - 2, 1)
    targets = np.full((n, m), (0.05 if soft else 0.04) / rest, dtype=np.float64)
    targets[rows, first] = 0.55 if soft else 0.96
    targets[rows, second] = 0.40 if soft else 0.04 / rest
    targets /= targets.sum(axis=1, keepdims=True)
    return targets.astype(np.float32), second


def _check_soft_targets_matter(
    make, data: _Data, *, seed: int, epochs: int, distill_epochs: int
) -> None:
    probe = make(seed)
    declared = probe.capabilities
    if not declared.soft_targets:
        raise _Skipped(
            declared.soft_targets_reason
            or "the learner declares that it uses only the targets' argmax"
        )
    after = {}
    for soft in (False, True):
        learner = _fitted(make, data, seed, epochs)
        targets, second = _targets(learner.predict_proba(data.public), soft)
        learner.distill(data.public, targets, epochs=distill_epochs)
        probs = learner.predict_proba(data.public).astype(np.float64)
        after[soft] = float(probs[np.arange(len(probs)), second].mean())
    if not after[True] - after[False] > MOVED:
        raise _Failed(
            "distilling two sets of targets with the same argmax but different soft mass (0.96 "
            "on the argmax, or 0.55 on it and 0.40 on a second class) gave a mean probability "
            f"of the second class of {after[False]:.4f} and {after[True]:.4f}: distill uses "
            "only the targets' argmax, and the teacher's knowledge in the other classes is "
            "lost. Fit the whole target distribution (minimise KL(targets || predictions), or "
            "train on one copy per class weighted by targets[:, c]); if the learner cannot, "
            "declare it: capabilities = Capabilities(soft_targets=False, "
            "soft_targets_reason='...') on the class (cosmosfl.learners.Capabilities), so "
            "this check is skipped with that reason"
        )


def _check_distilled_knowledge_survives_fit(
    make, data: _Data, *, seed: int, epochs: int, distill_epochs: int
) -> None:
    taught = _fitted(make, data, seed, epochs)
    targets = _shifted_targets(taught.predict_proba(data.public))
    taught.distill(data.public, targets, epochs=distill_epochs)
    taught.fit(data.x, data.y, epochs=epochs)
    # The same calls without the distill: what the learner knows from its private data alone.
    alone = _fitted(make, data, seed, epochs)
    alone.fit(data.x, data.y, epochs=epochs)
    kl_taught = _kl(targets, taught.predict_proba(data.public))
    kl_alone = _kl(targets, alone.predict_proba(data.public))
    if not kl_taught < kl_alone - 1e-6:
        raise _Failed(
            "after fit -> distill -> fit, predictions on the distilled inputs are no closer to "
            f"the distilled targets than after fit -> fit (KL(targets || predictions) "
            f"{kl_taught:.4f} vs {kl_alone:.4f}): the next fit erases what distill taught, so "
            "every round starts over and the client sends the same pseudo-labels. Keep the "
            "distilled knowledge: continue training the current model in fit (do not rebuild "
            "it), or remember the distilled (x, targets) and train on them with the private "
            "data in every fit (SklearnLearner does)"
        )
