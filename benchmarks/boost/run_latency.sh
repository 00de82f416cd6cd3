#!/usr/bin/env bash
# Per-query latency, ours and the artifact back to back on the same 2,000 queries (no nice, so
# both see the same machine load). Usage: run_latency.sh DATA_DIR OUT_DIR
set -euo pipefail
DATA=${1:-/tmp/boost_bench}
OUT=${2:-/tmp/boost_lat}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
for pair in "monoblock pmw_bypass" "monoblock exact_cache" "static tree_pmw_bypass" \
            "static tree_exact_cache" "streaming tree_pmw_bypass_warm"; do
  set -- $pair
  $PY benchmarks/boost/run.py --data "$DATA" --setting $1 --k 1 --system $2 --queries 2000 \
    --out "$OUT/ours_$1_k1_$2_s0.json"
  LOGURU_LEVEL=ERROR PYTHONPATH=/tmp/turbo PYTHONWARNINGS=ignore /tmp/turbo-venv/bin/python \
    benchmarks/boost/artifact_runner.py --data "$DATA" --setting $1 --k 1 --system $2 \
    --queries 2000 --out "$OUT/artifact_$1_k1_$2.json" 2>/dev/null
  echo "done $1 $2"
done
