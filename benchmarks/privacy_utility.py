"""Utility against ε, per mechanism: the final-round accuracy of each algorithm's reported
model from compare folders run at several budgets (docs/privacy.md, "Measured on digits").

    python benchmarks/privacy_utility.py inf=runs/eps-inf 16=runs/eps-16 4=runs/eps-4 1=runs/eps-1

Each folder is a `cosmosfl compare` output (algorithm/seed*/summary.json). Per algorithm and
budget: the mean over seeds of the mean over clients (± SEM over seeds), for all clients, for
the torch clients (DP-SGD under a budget) and for the scikit-learn clients
(subsample-and-aggregate); and the largest ε any site spent.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

TORCH = {"mlp", "cnn", "alexnet", "resnet8", "resnet18", "mobilenetv2", "squeezenet", "vgg11"}


def mean_sem(values: list[float]) -> str:
    n = len(values)
    mean = sum(values) / n
    sem = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else 0.0
    return f"{100 * mean:.1f} ± {100 * sem:.1f}"


def rows(folder: Path) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for path in sorted(folder.glob("*/seed*/summary.json")):
        s = json.loads(path.read_text())
        acc = s["final_round"]["accuracy"][s["reported_model"]]
        kinds = s["client_models"]
        groups = {
            "all": list(acc.values()),
            "torch (DP-SGD)": [a for c, a in acc.items() if kinds[c] in TORCH],
            "sklearn (S&A)": [a for c, a in acc.items() if kinds[c] not in TORCH],
        }
        cell = out.setdefault(s["algorithm"], {})
        for name, values in groups.items():
            if values:
                cell.setdefault(name, []).append(sum(values) / len(values))
        spent = [p["epsilon"] for p in s.get("privacy", {}).values()]
        cell.setdefault("max ε spent", []).append(max(spent) if spent else float("nan"))
    return out


def main(argv: list[str]) -> int:
    budgets = [a.split("=", 1) for a in argv]
    data = {eps: rows(Path(folder)) for eps, folder in budgets}
    header = ["algorithm", "clients"] + [f"ε = {eps}" for eps, _ in budgets]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    algorithms = list(next(iter(data.values())))
    for algorithm in algorithms:
        for group in ("all", "torch (DP-SGD)", "sklearn (S&A)"):
            cells = [mean_sem(data[eps][algorithm][group]) for eps, _ in budgets]
            print(f"| {algorithm} | {group} | " + " | ".join(cells) + " |")
    spent = [max(max(c["max ε spent"]) for c in data[eps].values()) for eps, _ in budgets]
    print("| (all) | largest ε spent by a site | " + " | ".join(f"{e:.3g}" for e in spent) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
