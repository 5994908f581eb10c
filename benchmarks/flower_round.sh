#!/bin/bash
# Seconds per round of a 10-SuperNode Flower deployment on digits (issue 14, docs/flower.md).
# usage: benchmarks/flower_round.sh LABEL [SRC]   (SRC: a cosmosfl src/ directory to measure,
#        e.g. a `git worktree` of another revision; default: this checkout's)
# Run it on an idle machine: the round is CPU-bound, so other work changes the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
LABEL=${1:?usage: flower_round.sh LABEL [SRC]}
export PYTHONPATH=${2:-$PWD/src}
OUT=runs/flower-$LABEL
rm -rf "$OUT" "$OUT-work"
uptime
/usr/bin/time -f "$LABEL: %e s wall, %U s user, %S s sys" .venv/bin/cosmosfl flower local \
    -c configs/default.yaml --out "$OUT" --work "$OUT-work" rounds=2 > "$OUT.log" 2>&1
tail -1 "$OUT.log"
.venv/bin/python - "$OUT/metrics.jsonl" "$LABEL" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
for r in records:
    s = r["seconds"]
    print(f"{sys.argv[2]} round {r['round']}: {s['total']:.1f} s "
          f"(prediction {s.get('prediction', 0):.1f}, flush {s.get('flush', 0):.1f})")
PY
