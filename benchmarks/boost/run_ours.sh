#!/usr/bin/env bash
# beam_dp's Boost (driver + pure mechanism) on the workload of workload.py, same systems,
# settings and query counts as run_artifact.sh. Usage: run_ours.sh DATA_DIR OUT_DIR [SEEDS]
set -euo pipefail
DATA=${1:-/tmp/boost_bench}
OUT=${2:-/tmp/boost_res}
SEEDS=${3:-0}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
run() {  # setting k system queries seed
  nice -n 10 $PY benchmarks/boost/run.py --data "$DATA" --setting "$1" --k "$2" --system "$3" \
    --queries "$4" --seed "$5" --out "$OUT/ours_$1_k$2_$3_s$5.json"
  echo "done $1 k=$2 $3 seed=$5"
}
for seed in $SEEDS; do
  for k in 0 1; do
    for s in pmw_bypass vanilla_pmw laplace exact_cache; do run monoblock $k $s 20000 $seed; done
    for s in exact_cache tree_exact_cache tree_pmw_bypass; do run static $k $s 10000 $seed; done
    for s in exact_cache tree_exact_cache tree_pmw_bypass tree_pmw_bypass_warm; do
      run streaming $k $s 20000 $seed; done
  done
done
