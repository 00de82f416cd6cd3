#!/usr/bin/env bash
# Runs the PMWG / BBScheduler benchmarks and writes benchmarks/pmwg/results/*.json and *.png.
# Usage: benchmarks/pmwg/run_all.sh [--quick]
#   --quick: fewer repetitions and queries (a smoke run, minutes); the README's numbers come from
#            the full run.
set -euo pipefail
cd "$(dirname "$0")"

if [[ "${1:-}" == "--quick" ]]; then
  python accuracy.py --ns 10000 100000 1000000 --reps 2 --queries 300
  python queries_within_budget.py --setting approx:100000:0.2 --queries 10000 --reps 1
  python bbscheduler.py --ns 10000 100000 --reps 4 --points 20
  exit 0
fi

# (a) accuracy vs alpha and n, pure and approximate DP (~10 min on 2 busy vCPUs).
python accuracy.py --ns 10000 100000 1000000 10000000 --alphas 0.05 0.1 0.2 0.4 --growth 8 \
  --queries 1000 --reps 6
# (b) queries answered within budget and alpha: PMWG vs per-query Laplace (~5-10 min).
python queries_within_budget.py --setting approx:100000:0.2 --setting approx:100000:0.4 \
  --setting pure:1000000:0.4 --queries 50000 --growth 2 --burst 20 --reps 3
# (c) BBScheduler + Laplace query-vector box vs the predicted errors (~5 min).
python bbscheduler.py --ns 10000 100000 1000000 --growth 10 --reps 40 --points 60
