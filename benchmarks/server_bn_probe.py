"""Do COSMOS's cluster models lose accuracy to BatchNorm statistics polluted by the neighbour
pass of r_B? Offline, from a COSMOS run's checkpoint (docs/ablations.md, part 1).

For each cluster model h_k in the checkpoint: top-1 on U's samples of the cluster's classes
(U's true labels, paper split only) as stored, and again after its BatchNorm running
statistics are recomputed on clean U (`reset_running_stats`, `momentum=None`, one train-mode
pass without gradients); and how far the stored running means are from the clean ones.

    python benchmarks/server_bn_probe.py runs/c10p-b/cosmos/seed3 \\
        -c configs/cifar10-paper.yaml data.data_dir=../shared/data
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import load_config


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run", type=Path, help="a COSMOS run directory (seed<k>) with checkpoint.pt")
    p.add_argument("-c", "--config", required=True)
    p.add_argument("overrides", nargs="*", help="config overrides (the run's seed is read)")
    args = p.parse_intermixed_args(argv)
    torch.set_num_threads(1)
    ck = torch.load(args.run / "checkpoint.pt", weights_only=False, map_location="cpu")
    seed = int(args.run.name.removeprefix("seed"))
    cfg = load_config(args.config, [*args.overrides, f"seed={seed}"])
    exp = build_experiment(cfg)
    part, state = exp.partition, ck["algorithm_state"]
    if part.class_groups is None or part.client_group is None:
        raise SystemExit("needs the paper split (class groups) to know a cluster's classes")
    y, u = exp.dataset.y_train[part.public], exp.public_x
    factory = exp.algorithm.server_learner
    print(f"after round {ck['round']}; |U| = {len(u)}")
    print("| cluster | members | BN layers | stored | BN on clean U | running-mean shift |")
    print("|---|---|---|---|---|---|")
    for k, model_state in sorted(state["cluster_models"].items()):
        members = sorted(c for c, kk in state["assignment"].items() if kk == k)
        classes = np.unique(np.concatenate([part.class_groups[int(part.client_group[c])]
                                            for c in members]))  # fmt: skip
        inside = np.isin(y, classes)
        h = factory(tuple(u.shape[1:]), exp.dataset.num_classes, 0)
        h.set_state(model_state)
        stored = h.predict_proba(u)
        bns = [m for m in h.model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        old = [m.running_mean.clone() for m in bns]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the pass
        h.model.train()
        with torch.no_grad():
            for i in range(0, len(u), 256):
                h.model(torch.as_tensor(u[i : i + 256]))
        h.model.eval()
        clean = h.predict_proba(u)
        shift = [float((o - m.running_mean).abs().mean() / (m.running_mean.abs().mean() + 1e-8))
                 for o, m in zip(old, bns, strict=True)]  # fmt: skip
        a_stored, a_clean = (
            float((q[inside].argmax(1) == y[inside]).mean()) for q in (stored, clean)
        )
        print(f"| {k} | {len(members)} | {len(bns)} | {a_stored:.3f} | {a_clean:.3f} "
              f"| {np.mean(shift) if shift else 0.0:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
