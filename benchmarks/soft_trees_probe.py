"""Does a forest learn soft targets as well through regressor trees as through weighted copies?

    python benchmarks/soft_trees_probe.py --seeds 8

Run by hand (about a minute), not a test. Per seed: a synthetic 6-class problem
(scikit-learn's make_classification, 36 features), a teacher (an MLP trained on 2,000 rows of
its own) labels a public set of 1,000 rows with its probabilities; a client with 200 labelled
rows fits a RandomForestClassifier(100) and distils the teacher's soft targets, once through
the weighted copies (`soft_targets="copies"`) and once through regressor trees
(`soft_targets="twin"`, learners/soft_trees.py); and, for contrast, scikit-learn's
RandomForestRegressor (max_features="sqrt") on the same rows and soft targets, which bootstraps
rows instead of copies. Printed: each route's accuracy on 2,000 test rows per seed, and the
paired differences twin - copies and rows - copies, mean ± SEM over seeds.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--bootstrap", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.neural_network import MLPClassifier

    from cosmosfl.learners.sklearn import SklearnLearner

    warnings.filterwarnings("ignore")
    diffs, rows_diffs = [], []
    print("| seed | copies | twin | rows (regressor forest) | teacher |")
    print("|---|---|---|---|---|")
    for seed in range(args.seeds):
        x, y = make_classification(
            5200, 36, n_informative=12, n_classes=6, n_clusters_per_class=2, random_state=seed
        )
        x_test, y_test = x[:2000], y[:2000]
        x_own, y_own = x[2000:2200], y[2000:2200]
        x_public = x[2200:3200]
        teacher = MLPClassifier((64,), max_iter=300, random_state=seed).fit(x[3200:], y[3200:])
        targets = teacher.predict_proba(x_public)
        acc = {}
        for route in ("copies", "twin"):
            forest = RandomForestClassifier(
                100, n_jobs=1, random_state=seed, bootstrap=args.bootstrap
            )
            learner = SklearnLearner(forest, num_classes=6, soft_targets=route)
            learner.fit(x_own, y_own)
            learner.distill(x_public, targets)
            acc[route] = float((learner.predict_proba(x_test).argmax(1) == y_test).mean())
        regressor = RandomForestRegressor(
            100, max_features="sqrt", n_jobs=1, random_state=seed, bootstrap=args.bootstrap
        ).fit(
            np.concatenate([x_own, x_public]),
            np.concatenate([np.eye(6)[y_own], targets]),
        )
        acc["rows"] = float((regressor.predict(x_test).argmax(1) == y_test).mean())
        teacher_acc = float((teacher.predict(x_test) == y_test).mean())
        diffs.append(acc["twin"] - acc["copies"])
        rows_diffs.append(acc["rows"] - acc["copies"])
        print(
            f"| {seed} | {acc['copies']:.4f} | {acc['twin']:.4f} | {acc['rows']:.4f} "
            f"| {teacher_acc:.4f} |"
        )
    for name, d in (("twin", diffs), ("rows", rows_diffs)):
        sem = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else 0.0
        print(f"{name} - copies: {100 * statistics.mean(d):+.2f} ± {100 * sem:.2f} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
