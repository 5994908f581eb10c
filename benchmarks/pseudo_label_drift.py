"""Do the clients' soft labels on U change from round to round? Per client model kind, the mean
ℓ1 distance (in [0, 2]) between a client's f_i(U) in consecutive rounds, and its local accuracy
f_i^(t,1) per round.

A learner that forgets what it distilled (refitting on private data alone each round) sends the
same soft labels every round: drift 0.000 and a flat accuracy. One that keeps the distilled
targets sends labels that move with the federation.

    python benchmarks/pseudo_label_drift.py -c configs/satellite-mixed.yaml \
        --data-dir ../shared/data --rounds 3
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import torch

from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.inprocess import simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args()
    overrides = [*args.overrides, f"rounds={args.rounds}"]
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    cfg = load_config(args.config, overrides)
    torch.set_num_threads(cfg.threads or 1)
    exp = build_experiment(cfg)
    n_public = len(exp.public_x)
    sent: dict[int, list[np.ndarray]] = defaultdict(list)
    inside: set[int] = set()  # clients in a distill call (which predicts on U for its metrics)
    for client in exp.clients:
        learner = client.learner
        predict, distill = learner.predict_proba, learner.distill

        def recording(x: np.ndarray, cid: int = client.id, predict=predict) -> np.ndarray:
            p = predict(x)
            if len(x) == n_public and cid not in inside:  # f_i(U), as sent to the server
                sent[cid].append(np.asarray(p, dtype=np.float64))
            return p

        def distilling(*args, cid: int = client.id, distill=distill, **kwargs):  # type: ignore[no-untyped-def]
            inside.add(cid)
            try:
                return distill(*args, **kwargs)
            finally:
                inside.discard(cid)

        learner.predict_proba = recording  # type: ignore[method-assign]
        learner.distill = distilling  # type: ignore[method-assign]
    result = simulate(exp.algorithm, exp.clients, exp.public_x, rounds=cfg.rounds, seed=cfg.seed)
    kinds = exp.client_models
    print(f"{cfg.data.dataset}: {len(exp.clients)} clients, {cfg.rounds} rounds, seed {cfg.seed}")
    print("| client kind | ℓ1 drift of f_i(U), round t-1 -> t | local top-1 per round |")
    print("|---|---|---|")
    for kind in sorted(set(kinds)):
        ids = [c.id for c in exp.clients if kinds[c.id] == kind]
        drift = []
        for t in range(1, cfg.rounds):
            steps = [
                float(np.abs(sent[c][t] - sent[c][t - 1]).sum(axis=1).mean())
                for c in ids
                if len(sent[c]) > t
            ]
            drift.append(f"{np.mean(steps):.3f}")
        accuracy = [
            f"{np.mean([rec['accuracy']['local'][str(c)] for c in ids]):.3f}"
            for rec in result.records
        ]
        print(f"| {kind} | {', '.join(drift)} | {', '.join(accuracy)} |")


if __name__ == "__main__":
    main()
