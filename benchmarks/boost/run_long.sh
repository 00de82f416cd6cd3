#!/usr/bin/env bash
# Long side by side (both systems, same workload) in the partitioned settings, plus more
# monoblock seeds. Two lanes, each one process at a time (run them concurrently: at most 2
# processes), every run `nice`d and checkpointed (its json is rewritten every 5,000 queries, so
# a stopped run keeps its curve so far; "complete": false marks it).
#   static:    the first $QS queries of the 300K workload (a prefix of a static workload is a
#              static workload, so ours' 300K run shares it): workload.py /tmp/boost_bench_300k 300000
#   streaming: a workload generated at $QT queries (1 -> 50 blocks, QT/50 queries per block):
#              workload.py /tmp/bb_100k 100000
#   monoblock: the 20K workload (workload.py /tmp/boost_bench 20000), seeds 8-23 (ours) and
#              73-88 (the artifact) added to results/seeds/ (0-7 and 64-72).
# Usage: run_long.sh artifact|ours|seeds|baselines OUT_DIR   (from the repository root)
set -euo pipefail
LANE=$1
OUT=${2:-/tmp/bb_res}
STATIC=${STATIC:-/tmp/boost_bench_300k}
STREAM=${STREAM:-/tmp/bb_100k}
MONO=${MONO:-/tmp/boost_bench}
QS=${QS:-150000}
QT=${QT:-100000}
mkdir -p "$OUT" "$OUT/seeds"
data() { if [ "$1" = static ]; then echo "$STATIC"; else echo "$STREAM"; fi; }
count() { if [ "$1" = static ]; then echo "$QS"; else echo "$QT"; fi; }
ours() {  # setting k system
  nice -n 10 .venv/bin/python benchmarks/boost/run.py --data "$(data "$1")" --setting "$1" \
    --k "$2" --system "$3" --queries "$(count "$1")" --seed 0 --checkpoint 5000 \
    --out "$OUT/ours_$1_k$2_$3_s0.json"
  echo "$(date -u +%T) done ours $1 k=$2 $3"
}
artifact() {  # setting k system
  LOGURU_LEVEL=ERROR PYTHONPATH=/tmp/turbo PYTHONWARNINGS=ignore nice -n 10 \
    /tmp/turbo-venv/bin/python benchmarks/boost/artifact_runner.py --data "$(data "$1")" \
    --setting "$1" --k "$2" --system "$3" --queries "$(count "$1")" --checkpoint 5000 \
    --out "$OUT/artifact_$1_k$2_$3.json" 2>>"$OUT/artifact_stderr.log"
  echo "$(date -u +%T) done artifact $1 k=$2 $3"
}
seeds() {  # monoblock k=1 pmw_bypass, 16 more seeds per implementation
  for i in $(seq 8 23); do
    nice -n 10 .venv/bin/python benchmarks/boost/run.py --data "$MONO" --setting monoblock \
      --k 1 --system pmw_bypass --queries 20000 --seed "$i" \
      --out "$OUT/seeds/ours_monoblock_k1_pmw_bypass_s$i.json"
    LOGURU_LEVEL=ERROR PYTHONPATH=/tmp/turbo PYTHONWARNINGS=ignore nice -n 10 \
      /tmp/turbo-venv/bin/python benchmarks/boost/artifact_runner.py --data "$MONO" \
      --setting monoblock --k 1 --system pmw_bypass --queries 20000 --seed $((65 + i)) \
      --out "$OUT/seeds/artifact_monoblock_k1_pmw_bypass_s$((65 + i)).json" \
      2>>"$OUT/artifact_stderr.log"
    echo "$(date -u +%T) done seeds $i / $((65 + i))"
  done
}
# Lanes (run two at a time; a queue may run `single` jobs in any order, as the session
# did): artifact = the artifact's Boost; ours = ours, Boost first;
# seeds = the monoblock seeds; baselines = the artifact's baselines (deterministic: they agree
# with ours to the 0.4 % grid margin at 10-20K queries, so they come last).
case "$LANE" in
  artifact)
    for k in 0 1; do artifact static $k tree_pmw_bypass; done
    for k in 0 1; do artifact streaming $k tree_pmw_bypass_warm; done ;;
  ours)    # *_wsv: sv_scope='window' (the artifact's whole-window SV rule); else spec Alg. 2
    for k in 0 1; do
      for s in tree_pmw_bypass_wsv exact_cache tree_exact_cache tree_pmw_bypass; do
        ours static $k $s; done; done
    for k in 0 1; do
      for s in tree_pmw_bypass_warm_wsv exact_cache tree_exact_cache tree_pmw_bypass_warm; do
        ours streaming $k $s; done; done ;;
  seeds) seeds ;;
  baselines)
    for k in 0 1; do for st in static streaming; do artifact $st $k exact_cache; done; done
    for k in 0 1; do for st in static streaming; do artifact $st $k tree_exact_cache; done; done ;;
  single) shift 2; "$@" ;;    # run_long.sh single OUT ours|artifact SETTING K SYSTEM
esac
