#!/usr/bin/env bash
# Runs the single-machine benchmarks, each writing benchmarks/<area>/results/ (see README.md).
# Usage: benchmarks/run_all.sh [--quick]
#   --quick: 100k events instead of 1M for the throughput benchmark, smoke runs of pmwg and
#            partitioning.
# PipelineDP is installed into a separate virtualenv (with the system site-packages, so beam_dp
# and apache-beam are shared) so that it cannot change the project's environment.
# Flink (benchmarks/flink) needs a running cluster and is not run here.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=1000000
QUICK=()
if [[ "${1:-}" == "--quick" ]]; then EVENTS=100000; QUICK=(--quick); fi

PDP_VENV=${PDP_VENV:-/tmp/pdp_venv}
if [[ ! -x "$PDP_VENV/bin/python" ]]; then
  python -m venv --system-site-packages "$PDP_VENV"
  "$PDP_VENV/bin/pip" install -q pipeline-dp==0.3.1
fi
PY_PDP="$PDP_VENV/bin/python"

# Variance: textbook vs variance-reduced, closed form + empirical (~10 min on 2 busy CPUs).
python benchmarks/tree_variance/run.py --dim-small 1000 --dim-large 64 \
  --empirical-steps-large 4096 --workers 2

# State size at T = 2^20 (< 2 min).
python benchmarks/state_size/run.py --check-log2-steps 10

# Throughput vs the non-DP windowed CombinePerKey, plus PipelineDP, same runner, same input.
"$PY_PDP" benchmarks/throughput/run.py --events "$EVENTS" --repeats 2 \
  --pipelines source baseline dp_sharded pipelinedp --tag "events$((EVENTS / 1000))k"
# Simple design (one stateful key per public key) vs sharded: 10k keys x 64 steps is
# infeasible on the FnApiRunner (see throughput/README.md), so it runs at 100 keys x 16 steps.
"$PY_PDP" benchmarks/throughput/run.py --events 20000 --keys 100 --steps 16 --repeats 2 \
  --pipelines baseline dp_sharded dp_simple --tag simple_vs_sharded

# Private partitioning, C5/C6/C9, key selection (~13 min), then the plots.
for section in empty c5 dynamic keys; do
  python benchmarks/partitioning/run.py "$section" ${QUICK[@]+"${QUICK[@]}"}
done
python benchmarks/partitioning/run.py plot

# PMWG and BBScheduler (~35 min; --quick: a few minutes).
python benchmarks/pmwg/run.py all ${QUICK[@]+"${QUICK[@]}"}
