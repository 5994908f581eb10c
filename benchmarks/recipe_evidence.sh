#!/usr/bin/env bash
# COSMOS's recipes side by side (issue 42, docs/cosmos.md "What a site gets"): for each config
# and seed, COSMOS validated, COSMOS paper, COMET and `local` on identical splits, every run its
# own process (run by hand; made for a many-core machine), then assembled into compare folders
# that `cosmosfl report` reads:
#   OUT/<name>/{cosmos,comet,local}/seed<s>   (COSMOS validated)  -> cosmosfl report OUT/<name>
#   OUT/<name>-paper/cosmos/seed<s>           (COSMOS paper)      -> cosmosfl report OUT/<name>-paper
#
#   DATA=../shared/data OUT=runs/recipes PAR=16 bash benchmarks/recipe_evidence.sh
#   NAMES="satellite-mixed" SEEDS="1 2 3" ... (default: the names below)
#
# Names: a shipped config, or cifar10-little (cifar10-small-clients with max_train 4000: about
# 100 training rows per client). Every run holds out data.validation_fraction 0.1 (the configs
# with documented figures pin 0), so the four are paired. CIFAR-10 runs use DEVICE (cuda if
# available) with no worker processes; satellite-mixed runs 3 rounds.
set -u
DATA=${DATA:-../shared/data}; OUT=${OUT:-runs/recipes}; PAR=${PAR:-4}; SEEDS=${SEEDS:-"1 2 3"}
NAMES=${NAMES:-"satellite-mixed cifar10-cpu cifar10-small-clients cifar10-little"}
DEVICE=${DEVICE:-cuda}
CLI=${CLI:-cosmosfl}
W=$OUT/.jobs; mkdir -p "$W"
jobs=$W/jobs.txt; : > "$jobs"
for s in $SEEDS; do
  for name in $NAMES; do
    cfg=$name; extra="data.validation_fraction=0.1"
    case $name in
      cifar10-little) cfg=cifar10-small-clients; extra="$extra data.max_train=4000 device=$DEVICE workers=1" ;;
      cifar10-*|fmnist-*) extra="$extra device=$DEVICE workers=1" ;;
      satellite-mixed) extra="$extra rounds=3" ;;
    esac
    for v in "validated cosmos algorithm.recipe=validated" "paper cosmos algorithm.recipe=paper" \
             "comet comet" "local local"; do
      echo "$name $cfg $s $v $extra" >> "$jobs"
    done
  done
done
run_one() {
  name=$1; cfg=$2; seed=$3; variant=$4; algo=$5; shift 5
  $CLI compare -c configs/$cfg.yaml --data-dir "$DATA" -a $algo --seeds $seed \
    --out "$W/$name/$variant/s$seed" --quiet "$@" > "$W/$name-$variant-s$seed.log" 2>&1
  echo "$(date +%T) $name $variant seed $seed: exit $?"
}
export -f run_one; export W CLI DATA
OMP_NUM_THREADS=1 xargs -P "$PAR" -L 1 bash -c 'run_one "$@"' _ < "$jobs"
for run in "$W"/*/*/s*/*/seed*; do
  [ -f "$run/summary.json" ] || continue
  variant=$(basename "$(dirname "$(dirname "$(dirname "$run")")")")
  name=$(basename "$(dirname "$(dirname "$(dirname "$(dirname "$run")")")")")
  algo=$(basename "$(dirname "$run")")
  dest=$OUT/$name; [ "$variant" = paper ] && dest=$OUT/$name-paper
  mkdir -p "$dest/$algo" && cp -r "$run" "$dest/$algo/"
done
for d in "$OUT"/*/; do [ "$(basename "$d")" = .jobs ] || $CLI report "$d" > /dev/null; done
echo "reports: $OUT/<name>/client-gains.md and cosmos-decisions.md"
