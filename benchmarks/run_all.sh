#!/usr/bin/env bash
# Runs every benchmark and writes benchmarks/results/*.json, *.png and profile_*.txt.
# Usage: benchmarks/run_all.sh [--quick]
#   --quick: 100k events instead of 1M for the throughput benchmark.
# PipelineDP is installed into a separate virtualenv (with the system site-packages, so beam_dp
# and apache-beam are shared) so that it cannot change the project's environment.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=1000000
if [[ "${1:-}" == "--quick" ]]; then EVENTS=100000; fi

PDP_VENV=${PDP_VENV:-/tmp/pdp_venv}
if [[ ! -x "$PDP_VENV/bin/python" ]]; then
  python -m venv --system-site-packages "$PDP_VENV"
  "$PDP_VENV/bin/pip" install -q pipeline-dp==0.3.1
fi
PY_PDP="$PDP_VENV/bin/python"

# (a) variance: textbook vs variance-reduced, closed form + empirical (~10 min on 2 busy CPUs).
python benchmarks/tree_variance.py --dim-small 1000 --dim-large 64 --empirical-steps-large 4096 \
  --workers 2

# (c) state size at T = 2^20 (< 2 min).
python benchmarks/state_size.py --check-log2-steps 10

# (b) throughput vs the non-DP windowed CombinePerKey, plus PipelineDP, same runner, same input.
"$PY_PDP" benchmarks/throughput.py --events "$EVENTS" --repeats 2 \
  --pipelines source baseline dp_sharded pipelinedp --tag "events$((EVENTS / 1000))k"
# (b-i) simple design (one stateful key per public key) vs sharded: 10k keys x 64 steps is
# infeasible on the FnApiRunner (see README), so it runs at 100 keys x 16 steps.
"$PY_PDP" benchmarks/throughput.py --events 20000 --keys 100 --steps 16 --repeats 2 \
  --pipelines baseline dp_sharded dp_simple --tag simple_vs_sharded
# Profiles (cProfile, top entries by own time and cumulative time).
python benchmarks/throughput.py --profile dp_sharded --events 20000 --tag events20k
python benchmarks/throughput.py --profile baseline --events 20000 --tag events20k
python benchmarks/throughput.py --profile dp_simple --events 5000 --keys 100 --steps 16 \
  --tag keys100_steps16
