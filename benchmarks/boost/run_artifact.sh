#!/usr/bin/env bash
# The authors' artifact (columbia/turbo-artifact @ eaefd86, mock mode) on our workload.
# Setup (never committed): fetch the repository into /tmp/turbo, then
#   python3.11 -m venv /tmp/turbo-venv && /tmp/turbo-venv/bin/pip install torch "pandas<2" \
#     "numpy<2" "setuptools<70" simpy omegaconf loguru typer termcolor sortedcollections scipy \
#     redis redisai psycopg2-binary pyyaml opacus mlflow-skinny
# Usage: benchmarks/boost/run_artifact.sh DATA_DIR OUT_DIR
set -euo pipefail
DATA=${1:-/tmp/boost_bench}
OUT=${2:-/tmp/boost_res}
mkdir -p "$OUT"
export LOGURU_LEVEL=ERROR PYTHONPATH=/tmp/turbo PYTHONWARNINGS=ignore
run() {  # setting k system queries
  nice -n 10 /tmp/turbo-venv/bin/python benchmarks/boost/artifact_runner.py --data "$DATA" \
    --setting "$1" --k "$2" --system "$3" --queries "$4" --out "$OUT/artifact_$1_k$2_$3.json" \
    2>>"$OUT/artifact_stderr.log"
  echo "done $1 k=$2 $3"
}
for k in 0 1; do
  for s in pmw_bypass vanilla_pmw laplace exact_cache; do run monoblock $k $s 20000; done
  for s in exact_cache tree_exact_cache tree_pmw_bypass; do run static $k $s 10000; done
  for s in exact_cache tree_exact_cache tree_pmw_bypass tree_pmw_bypass_warm; do
    run streaming $k $s 20000; done
done
