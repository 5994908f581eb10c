"""Would a COSMOS client predicting with the average of h_π(i) and its own model beat both?
Offline, from a finished COSMOS run's checkpoint (docs/ablations.md).

The checkpoint holds h_k and each client's f_i^(t,2) (after distillation). With `--fit E` each
client first trains E epochs on its private data, as the next round's local step would
(f_i^(t+1,1)-like, the point that is not distilled towards h_k). Prints the mean top-1 over
clients of h_π(i), of the client's model, of their average and of their product (log-sum),
beside the run's last record.

    python benchmarks/ensemble_probe.py runs/c10p-a/cosmos/seed1 -c configs/cifar10-paper.yaml \\
        --fit 2 data.data_dir=../shared/data threads=1
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import load_config


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run", type=Path, help="a COSMOS run directory (seed<k>) with checkpoint.pt")
    p.add_argument("-c", "--config", required=True)
    p.add_argument("--fit", type=int, default=0, help="local epochs before predicting")
    p.add_argument("overrides", nargs="*", help="config overrides (the run's seed is read)")
    args = p.parse_intermixed_args(argv)
    torch.set_num_threads(1)
    seed = int(args.run.name.removeprefix("seed"))
    exp = build_experiment(load_config(args.config, [*args.overrides, f"seed={seed}"]))
    ck = torch.load(args.run / "checkpoint.pt", weights_only=False, map_location="cpu")
    state = ck["algorithm_state"]
    shape, m = tuple(exp.public_x.shape[1:]), exp.dataset.num_classes
    cluster_models = {}
    for k, model_state in state["cluster_models"].items():
        cluster_models[int(k)] = exp.algorithm.server_learner(shape, m, 0)
        cluster_models[int(k)].set_state(model_state)
    scores: dict[str, list[float]] = {"h_pi(i)": [], "own": [], "average": [], "product": []}
    for client in exp.clients:
        client.learner.set_state(ck["clients"][client.id]["learner"])
        if args.fit:
            client.learner.fit(*client.train, epochs=args.fit)
        x, y = client.test
        h = cluster_models[int(state["assignment"][client.id])].predict_proba(x)
        own = client.learner.predict_proba(x)
        combined = {"h_pi(i)": h, "own": own, "average": (h + own) / 2,
                    "product": np.log(h + 1e-9) + np.log(own + 1e-9)}  # fmt: skip
        for name, probs in combined.items():
            scores[name].append(float((probs.argmax(axis=1) == y).mean()))
    last = json.loads((args.run / "metrics.jsonl").read_text().splitlines()[-1])
    print(f"{args.run} after round {ck['round']}, own model after {args.fit} local epochs:")
    print("  " + ", ".join(f"{k} {100 * np.mean(v):.2f}" for k, v in scores.items()))
    print("  record: " + ", ".join(f"{k} {100 * v:.2f}" for k, v in last["mean_accuracy"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
