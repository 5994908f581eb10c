"""`cosmosfl audit`: the membership-inference audit of one site under a config
(privacy/audit.py, docs/privacy.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_parser(sub: Any, add_config_args: Any) -> None:
    audit = sub.add_parser(
        "audit",
        help="membership-inference audit of what one site releases (canaries, paired runs)",
        description="Plants canary records in one site's private data (and near-duplicates in "
        "U), runs the federation twice per seed so each canary is a member once, and reports "
        "per channel (soft labels each round, the deployed model) AUC, TPR at 1 %% and 0.1 %% "
        "FPR and the empirical ε lower bound, beside the accountant's ε (docs/privacy.md).",
    )
    add_config_args(audit)
    audit.add_argument("--canaries", type=int, default=20, help="canary records (default 20)")
    audit.add_argument("--client", type=int, default=0, help="the audited site (default 0)")
    audit.add_argument("--seeds", default="1", help="comma-separated seeds (default 1)")
    audit.add_argument("--out", "-o", help="folder for audit.json and audit.md")


def run(args: argparse.Namespace, cfg: Any) -> int:
    from cosmosfl.experiment.errors import ConfigError
    from cosmosfl.privacy.audit import audit_table, run_audit

    try:
        seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds {args.seeds!r}: give integers separated by commas") from None
    result = run_audit(cfg, canaries=args.canaries, client=args.client, seeds=seeds or [cfg.seed])
    table = audit_table(result)
    print(table, end="")
    if result["lower_bound_within_accountant"] is False:
        print("warning: an empirical ε lower bound exceeds the accountant's ε: a bug")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "audit.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "audit.md").write_text(table)
        print(f"saved {out / 'audit.json'} and {out / 'audit.md'}")
    return 0
