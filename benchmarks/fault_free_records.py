"""Write the per-round records of every algorithm on a small digits config, to compare two
versions of cosmosfl (e.g. before and after a change that must not alter fault-free runs).

    PYTHONPATH=/path/to/old/src python benchmarks/fault_free_records.py old.json
    PYTHONPATH=src python benchmarks/fault_free_records.py new.json
    python benchmarks/fault_free_records.py --compare old.json new.json

Records are compared without `seconds` (wall clock) and on the keys the old version wrote.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ALGORITHMS = ("cosmos", "fedmd", "fedct", "comet", "local")


def records() -> dict[str, list[dict]]:
    import yaml

    from cosmosfl.experiment.config import load_config
    from cosmosfl.experiment.runner import run_experiment

    out = {}
    for name in ALGORITHMS:
        raw = {
            "rounds": 2,
            "threads": 1,
            "data": {"num_clients": 6},
            # torch (with BatchNorm) and scikit-learn clients; COSMOS with r_B augmentation
            "clients": {"models": {"cnn": 0.4, "logistic_regression": 0.2, "mlp": 0.4}},
            "algorithm": {"name": name, "pretrain_epochs": 2, "local_epochs": 1},
        }
        if name == "cosmos":
            raw["algorithm"].update(server_model="cnn", server_epochs=1, distill_epochs=1)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.yaml"
            path.write_text(yaml.safe_dump(raw))  # a file: both versions read it the same way
            result = run_experiment(load_config(path), progress=False)
        out[name] = [{k: v for k, v in r.items() if k != "seconds"} for r in result.records]
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"]:
        old, new = (json.loads(Path(p).read_text()) for p in argv[1:3])
        same = True
        for name in ALGORITHMS:
            equal = [{k: r[k] for k in o} for o, r in zip(old[name], new[name], strict=True)]
            ok = equal == old[name]
            same &= ok
            print(f"{name}: {'identical' if ok else 'DIFFERENT'}")
        return 0 if same else 1
    Path(argv[0]).write_text(json.dumps(records()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
