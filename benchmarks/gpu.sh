#!/usr/bin/env bash
# The prepared GPU run (issue 14): one call, under 8 minutes on one GPU, JSON in --out.
#
#   bash benchmarks/gpu.sh [--toy] [--out DIR] [--data-dir DIR] [--budget SECONDS] [--config FILE]
#
# Measures, on the device torch sees: training images/s of the paper's models (VGG16 server,
# MobileNetV2, SqueezeNet, ResNet18, AlexNet; 32 px) in fp32 and bf16 autocast, NCHW and
# channels-last; same-architecture models stacked with vmap against a loop; and round 1 of
# configs/paper-cifar10.yaml for as long as the budget allows, beside the paper's 5-20 min
# per round on 2x RTX 4090. Writes DIR/gpu.json (DIR/gpu-toy.json with --toy).
#
# Without --toy it needs torch with CUDA and stops with exit status 3 otherwise. --toy runs
# everything at tiny sizes on whatever device there is (a check, not a measurement).
# Environment: PYTHON (default python3, the interpreter holding torch), COSMOSFL_DATA_DIR
# (folder with cifar10_jpeg.npz; also looked for in ../shared/data and .gpudata/; without it
# the round runs on random images of CIFAR-10's shape: timings hold, accuracies do not),
# GPU_BENCH_HARD_LIMIT (seconds after which the run is killed, default 540).
# See benchmarks/README.md ("gpu") for how to run it on the project's GPU machine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

toy=0
args=()
while (($#)); do
    case "$1" in
        --toy) toy=1 ;;
        --out | --data-dir | --budget | --config)
            (($# >= 2)) || { echo "gpu.sh: $1 needs a value" >&2; exit 2; }
            args+=("$1" "$2")
            shift
            ;;
        -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "gpu.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ " ${args[*]-} " == *" --out "* ]] || args+=(--out benchmarks/results)
if [[ -z "${COSMOSFL_DATA_DIR:-}" && -f .gpudata/cifar10_jpeg.npz ]]; then
    export COSMOSFL_DATA_DIR="$root/.gpudata"
fi

# Preflight: a clear message instead of a traceback when the interpreter lacks what we need.
"$py" - "$toy" <<'EOF' || exit 3
import importlib.util, sys
missing = [m for m in ("torch", "numpy", "yaml", "sklearn", "PIL", "rich", "matplotlib")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu.sh: {sys.executable} lacks {', '.join(missing)}; set PYTHON to the "
             "interpreter that holds torch, or carry the wheels (benchmarks/README.md)")
import torch
if sys.argv[1] != "1" and not torch.cuda.is_available():
    sys.exit(f"gpu.sh: torch {torch.__version__} at {sys.executable} sees no CUDA device "
             "(CPU-only build, no driver, or CUDA_VISIBLE_DEVICES); use --toy for a CPU check")
where = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
print(f"gpu.sh: torch {torch.__version__} on {where}, python {sys.version.split()[0]}")
EOF

if ((toy)); then
    # One thread: a toy run is a check on shared CI cores, where threads fight each other.
    exec "$py" -m benchmarks gpu --quick --threads 1 "${args[@]}"
fi
exec timeout -k 10 "${GPU_BENCH_HARD_LIMIT:-540}" "$py" -m benchmarks gpu "${args[@]}"
