"""Decision trees and forests trained on soft targets without the weighted copies.

A scikit-learn tree classifier learns soft targets only as weighted copies of each row, one
per class (up to N × M rows). A regressor tree fitted on the N rows, with each row's class
mass as an M-column output, grows the same tree from the same statistics:

- Split choice. Gini impurity on copies, summed over a node, is W·(1 − Σ_c p̄_c²) with W the
  node's weight and p̄ its weighted class shares; multi-output squared error on the targets is
  Σ_rows w·Σ_c t_c² − W·Σ_c t̄_c². The first term is a sum over rows, so it cancels between a
  node and its children, and t̄ = p̄: the impurity decrease of every candidate split, and with
  it `min_impurity_decrease` and `ccp_alpha`, is the same number on both routes.
- Leaves. A classifier's leaf value is its weighted class shares, the regressor's its
  weighted mean target: the same vector, so `predict_proba` is the regressor's `predict`.

A forest is grown tree by tree here, as scikit-learn grows it: the same per-tree seeds from
`random_state`, and each tree's bootstrap drawn over the *copies* with the probabilities and
sample count scikit-learn uses for the classifier on the copies (draws proportional to the
weights, as scikit-learn 1.9 draws them), then summed per row and class. That keeps what
bagging means on copies: a row with 4 copies is present in almost every tree, with a noisy
share of its classes (scikit-learn's RandomForestRegressor would bootstrap rows and leave about
a third of them out of each tree: another model, 1.0 ± 0.2 points less accurate in
benchmarks/soft_trees_probe.py). The trees then match the classifier's on the
copies split for split, up to ties between equally good splits, which floating-point sums in
another order can break the other way.
`min_samples_leaf` / `min_samples_split` count rows here, copies there; at their defaults (1,
2) that changes nothing, since a node of one row's copies cannot be split either.

Only the exact classes below, with the Gini criterion (whose equivalence is shown above) and
no `class_weight` or `oob_score` (which the regressor trees lack), take this route; every other
estimator keeps the copies.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral
from typing import Any

import numpy as np

from cosmosfl.learners.training_rows import TrainingRows

# Classifier -> (its tree regressor, whether it is a forest), by import path (scikit-learn is
# imported on use).
TWINS = {
    "sklearn.tree._classes.DecisionTreeClassifier": ("DecisionTreeRegressor", False),
    "sklearn.ensemble._forest.RandomForestClassifier": ("DecisionTreeRegressor", True),
    "sklearn.ensemble._forest.ExtraTreesClassifier": ("ExtraTreeRegressor", True),
}
# Settings of the classifier that are not its trees' (the forest's own, or the criterion:
# the regressor's is squared error).
_NOT_CARRIED = frozenset({"criterion", "class_weight", "random_state"})
MAX_SEED = np.iinfo(np.int32).max  # scikit-learn's bound for per-tree seeds


def _path(estimator: Any) -> str:
    cls = type(estimator)
    return f"{cls.__module__}.{cls.__qualname__}"


def twin_reason(estimator: Any) -> str | None:
    """None when `estimator` can learn soft targets through regressor trees, else why not."""
    if _path(estimator) not in TWINS:
        return (
            f"{type(estimator).__name__} has no regressor twin (DecisionTreeClassifier, "
            "RandomForestClassifier and ExtraTreesClassifier have)"
        )
    params = estimator.get_params(deep=False)
    if params.get("criterion", "gini") != "gini":
        return (
            f"criterion={params['criterion']!r}: only the Gini impurity equals the twin's "
            "squared error on soft targets"
        )
    if params.get("class_weight") is not None:
        return "class_weight is set, and the regressor twin has no class weights"
    if params.get("oob_score"):
        return "oob_score is set, and the regressor twin grows its trees itself"
    if params.get("warm_start"):
        return "warm_start is set, and every refit here starts from scratch"
    return None


def _twin_maker(estimator: Any) -> Callable[[Any], Any]:
    """`seed -> a fresh regressor tree` with every setting of the tree classifier (or of a
    forest's trees) `estimator`, the settings read once."""
    from sklearn import tree

    cls = getattr(tree, TWINS[_path(estimator)][0])
    mine = cls().get_params(deep=False)
    theirs = estimator.get_params(deep=False)
    carried = {k: v for k, v in theirs.items() if k in mine and k not in _NOT_CARRIED}
    return lambda seed: cls(**carried, random_state=seed)


def tree_twin(estimator: Any, seed: Any) -> Any:
    """A fresh regressor tree with every setting of the tree classifier (or of a forest's
    trees) `estimator`, `random_state` = `seed`."""
    return _twin_maker(estimator)(seed)


class SoftTrees:
    """Regressor trees fitted to soft targets, read as a classifier over all M classes
    (`classes_` = 0..M-1, `predict_proba` = the trees' mean targets, averaged)."""

    def __init__(self, trees: list[Any], num_classes: int) -> None:
        self.trees = trees
        self.classes_ = np.arange(num_classes)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32)  # what the trees were grown on
        out = np.zeros((len(x), len(self.classes_)))
        for tree in self.trees:
            out += np.asarray(tree.predict(x), np.float64).reshape(out.shape)
        return out / len(self.trees)


def _class_mass(rows: TrainingRows, num_classes: int, picked: np.ndarray | None) -> np.ndarray:
    """(N, M) mass per row and class: the copies' weights, or how often each copy was drawn."""
    cell = rows.index * num_classes + rows.y
    n = len(rows.x) * num_classes
    if picked is None:
        mass = np.bincount(cell, weights=rows.w, minlength=n)
    else:
        mass = np.bincount(cell[picked], minlength=n).astype(np.float64)
    return mass.reshape(len(rows.x), num_classes)


def _grown(tree: Any, x: np.ndarray, mass: np.ndarray) -> Any:
    # Rows of no mass stay, with weight 0, as their copies stay in the classifier's tree: their
    # values take part in where thresholds fall between rows.
    weight = mass.sum(axis=1)
    tree.fit(x, mass / np.maximum(weight, 1e-300)[:, None], sample_weight=weight)
    return tree


def _draws(params: dict[str, Any], copy_weights: np.ndarray) -> int:
    """How many copies scikit-learn draws for each tree's bootstrap (its max_samples rule)."""
    limit = params.get("max_samples")
    if limit is None:
        return len(copy_weights)
    if isinstance(limit, Integral):
        return int(limit)
    return max(int(limit * copy_weights.sum()), 1)


def fit_soft_trees(template: Any, rows: TrainingRows, num_classes: int) -> SoftTrees:
    """`template`'s tree(s) grown on the unique rows of `rows` with the class mass of their
    weighted copies as targets (a forest: per tree, the copies scikit-learn would draw)."""
    from sklearn.utils import check_random_state

    x = np.asarray(rows.x, np.float32)
    params = template.get_params(deep=False)
    make = _twin_maker(template)
    mass = _class_mass(rows, num_classes, None)  # every tree's, without a bootstrap
    if not TWINS[_path(template)][1]:
        return SoftTrees([_grown(make(params.get("random_state")), x, mass)], num_classes)
    rng = check_random_state(params.get("random_state"))
    seeds = [rng.randint(MAX_SEED) for _ in range(params["n_estimators"])]
    p = rows.w / rows.w.sum()
    draws = _draws(params, rows.w)
    bootstrap = params.get("bootstrap", True)

    def grow(seed: int) -> Any:
        if bootstrap:
            picked = np.random.RandomState(seed).choice(len(rows.w), draws, replace=True, p=p)
            return _grown(make(seed), x, _class_mass(rows, num_classes, picked))
        return _grown(make(seed), x, mass)

    jobs = params.get("n_jobs")
    if jobs in (None, 1):
        return SoftTrees([grow(seed) for seed in seeds], num_classes)
    from joblib import Parallel, delayed  # as the forest would: trees release the GIL

    trees = Parallel(n_jobs=jobs, prefer="threads")(delayed(grow)(seed) for seed in seeds)
    return SoftTrees(list(trees), num_classes)
