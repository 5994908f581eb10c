#!/usr/bin/env bash
# COSMOS's recipes side by side (issue 42, docs/cosmos.md "What a site gets"): for each config
# and seed, COSMOS validated (with `deploy: mix`, so each record holds the deployed mix AND the
# own model after the gate, `client_model`), COSMOS paper, COMET, FedMD and `local` on
# identical splits, every run its own process (run by hand; made for a many-core machine),
# then assembled into compare folders that `cosmosfl report` reads:
#   OUT/<name>/{cosmos,comet,fedmd,local}/seed<s>   (COSMOS validated) -> cosmosfl report OUT/<name>
#   OUT/<name>-paper/cosmos/seed<s>                 (COSMOS paper)     -> cosmosfl report OUT/<name>-paper
#
#   DATA=../shared/data OUT=runs/recipes PAR=16 bash benchmarks/recipe_evidence.sh
#   NAMES="satellite-mixed" SEEDS="1 2 3" VARIANTS="validated local" ... (defaults below)
#
# Names: a shipped config, or cifar10-little (cifar10-small-clients with max_train 4000: about
# 100 training rows per client). Jobs start in the order of NAMES, then seeds, then VARIANTS, so
# the names that matter most go first. Every run holds out data.validation_fraction 0.1 (the
# configs with documented figures pin 0), so the variants are paired. CIFAR-10 and
# Fashion-MNIST runs use DEVICE (cuda if available) with no worker processes; satellite-mixed
# runs 3 rounds. JOBLIST (optional) names a file of lines `name seed variant [key=value ...]`
# to run instead of every name x seed x variant, in its order (e.g. longest first on a lent
# machine, or only what an earlier grid lacks). DEADLINE (seconds, optional) ends every run still going at that time after the
# start, so a lent machine returns what finished; REPORT=0 skips the assembly and reports.
set -u
DATA=${DATA:-../shared/data}; OUT=${OUT:-runs/recipes}; PAR=${PAR:-4}; SEEDS=${SEEDS:-"1 2 3"}
NAMES=${NAMES:-"cifar10-little cifar10-cpu fmnist-paper cifar10-small-clients satellite-mixed"}
VARIANTS=${VARIANTS:-"validated paper comet fedmd local"}
DEVICE=${DEVICE:-cuda}; CLI=${CLI:-cosmosfl}; REPORT=${REPORT:-1}
END=$(( $(date +%s) + ${DEADLINE:-1000000000} ))
W=$OUT/.jobs; mkdir -p "$W"
jobs=$W/jobs.txt; : > "$jobs"
add_job() {  # name seed variant [key=value ...]
  name=$1; s=$2; v=$3; shift 3
  cfg=$name; extra="data.validation_fraction=0.1"
  case $name in
    cifar10-little) cfg=cifar10-small-clients; extra="$extra data.max_train=4000 device=$DEVICE workers=1" ;;
    cifar10-*|fmnist-*) extra="$extra device=$DEVICE workers=1" ;;
    satellite-mixed) extra="$extra rounds=3" ;;
  esac
  case $v in
    validated) spec="validated cosmos algorithm.recipe=validated algorithm.deploy=mix" ;;
    paper) spec="paper cosmos algorithm.recipe=paper" ;;
    *) spec="$v $v" ;;
  esac
  # No trailing blank: xargs -L would join the next line onto this one.
  echo "$name $cfg $s $spec $extra $*" | sed 's/ *$//' >> "$jobs"
}
if [ -n "${JOBLIST:-}" ]; then
  while read -r line; do [ -n "$line" ] && add_job $line; done < "$JOBLIST"
else
  for name in $NAMES; do for s in $SEEDS; do for v in $VARIANTS; do add_job $name $s $v; done; done; done
fi
run_one() {
  name=$1; cfg=$2; seed=$3; variant=$4; algo=$5; shift 5
  left=$(( END - $(date +%s) ))
  if [ "$left" -le 5 ]; then echo "$(date +%T) $name $variant seed $seed: not started"; return; fi
  timeout "$left" $CLI compare -c configs/$cfg.yaml --data-dir "$DATA" -a $algo --seeds $seed \
    --out "$W/$name/$variant/s$seed" --quiet "$@" > "$W/$name-$variant-s$seed.log" 2>&1
  rc=$?
  echo "$(date +%T) $name $variant seed $seed: exit $rc"
}
export -f run_one; export W CLI DATA END
OMP_NUM_THREADS=1 xargs -P "$PAR" -L 1 bash -c 'run_one "$@"' _ < "$jobs"
[ "$REPORT" = 1 ] || exit 0
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
