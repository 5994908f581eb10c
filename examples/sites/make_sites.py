"""Write a three-site federation to try `cosmosfl` with sites that bring their own files.

From scikit-learn's digits (8x8 images as 64 pixel columns, so it runs anywhere): a public
set U without labels that every party holds, and three sites, each with its own CSV (different
sizes and class mixes; one never saw the digit 9; one spells its labels as numbers), its own
model (scikit-learn, torch, LightGBM) and its own site file. Also a run config for the
in-process try-out. docs/tutorials/organisations.md walks through it.

    python examples/sites/make_sites.py --out org
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
# (site, framework model, rows, classes it holds and how often)
SITES = [
    ("hospital-a", "random_forest", 260, [0, 1, 2, 3, 4, 5, 6, 7, 8]),  # never saw a 9
    ("hospital-b", "mlp", 420, [2, 3, 4, 5, 6, 7, 8, 9]),
    ("clinic-c", "lightgbm", 340, [0, 1, 5, 6, 7, 8, 9]),
]


def write(out: Path, seed: int = 0, models: list[str] | None = None, scale: float = 1.0) -> None:
    """Write the federation into `out`; `models` replaces the sites' models, `scale` their
    number of rows (tests use smaller sites)."""
    rng = np.random.default_rng(seed)
    digits = load_digits()
    x, y = digits.data.astype(np.float32), digits.target
    order = rng.permutation(len(y))
    public, rest = order[:400], order[400:]
    columns = [f"p{i}" for i in range(x.shape[1])]
    out.mkdir(parents=True, exist_ok=True)
    _csv(out / "public.csv", columns, x[public])
    used = np.zeros(len(y), dtype=bool)
    for k, (name, model, rows, classes) in enumerate(SITES):
        model = models[k] if models else model
        pool = [i for i in rest if y[i] in classes and not used[i]]
        take = np.array(pool[: int(rows * scale)])
        used[take] = True
        folder = out / name
        folder.mkdir(exist_ok=True)
        if name == "clinic-c":  # this site stores digits as numbers, not names
            labels = [str(int(v)) for v in y[take]]
            label_map = "\n".join(f"  {i}: {n}" for i, n in enumerate(NAMES))
            mapping = f"label_map:   # this site's spellings -> the run's names\n{label_map}\n"
        else:
            labels = [NAMES[int(v)] for v in y[take]]
            mapping = ""
        _csv(folder / "records.csv", columns, x[take], labels)
        (folder / "site.yaml").write_text(
            f"# {name}: read only by this site's node\n"
            "data: records.csv          # this site's own labelled records\n"
            "label_column: diagnosis\n"
            f"model: {model}\n"
            "public: ../public.csv      # this site's copy of U\n" + mapping
        )
    (out / "run.yaml").write_text(
        "# The federation's run config (what the coordinator shares): U and the label set.\n"
        "seed: 1\nrounds: 3\n"
        "algorithm: {name: cosmos, pretrain_epochs: 5, local_epochs: 2}\n"
        "sites:\n"
        "  public: public.csv\n"
        f"  labels: [{', '.join(NAMES)}]\n"
        "  label_column: diagnosis\n"
        "  files: [hospital-a/site.yaml, hospital-b/site.yaml, clinic-c/site.yaml]\n"
    )


def _csv(path: Path, columns: list[str], x: np.ndarray, labels: list[str] | None = None) -> None:
    header = ",".join(columns + (["diagnosis"] if labels is not None else []))
    lines = [header]
    for i, row in enumerate(x):
        cells = [f"{v:g}" for v in row] + ([labels[i]] if labels is not None else [])
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write(Path(args.out), args.seed)
    print(f"wrote {args.out}: public.csv, run.yaml and three sites")
