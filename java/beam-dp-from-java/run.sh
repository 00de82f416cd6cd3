#!/usr/bin/env bash
# Runs CountFromJava: a Java pipeline (Beam Java 2.62.0) applying beam_dp's ContinualCountPerKey
# by field names through a Python expansion service, on an embedded Flink job server.
#
#   bash java/beam-dp-from-java/run.sh OUTPUT_DIR
#
# Starts (and stops again, by pid) three local services on free ports:
#   * a Python SDK worker pool (the EXTERNAL environment of the Python transform; this
#     interpreter's apache_beam and the repository's beam_dp),
#   * the Python expansion service (python -m apache_beam.runners.portability.expansion_service_main,
#     transforms allowed: beam_dp.*; --beam_dp_epsilon is the budget of an expansion),
#   * the Flink 1.19 job server of Beam 2.62 with the Java SDK harness's jamm (the Kafka-enabled
#     thin jar of .ci/fetch_expansion_service.sh), this project's jar and
#     beam-sdks-java-extensions-python on its class path (the Java transforms run EMBEDDED in it).
# Needs: java 17, mvn, $BEAM_DP_CACHE/kafka-xlang/beam-runners-flink-1.19-job-server-2.62.0-kafka-thin.jar,
# BEAM_DP_NOISE_KEY (the noise key, read by reference: env:BEAM_DP_NOISE_KEY).
# Env: PYTHON (default python3). Exit code: the Java pipeline's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: run.sh OUTPUT_DIR}"
python="${PYTHON:-python3}"
cache="${BEAM_DP_CACHE:-$HOME/.cache/beam_dp}"
jobserver="$cache/kafka-xlang/beam-runners-flink-1.19-job-server-2.62.0-kafka-thin.jar"
[[ -s "$jobserver" ]] || { echo "run.sh: $jobserver missing (bash .ci/fetch_flink_job_server.sh && bash .ci/fetch_expansion_service.sh)" >&2; exit 2; }
: "${BEAM_DP_NOISE_KEY:?set BEAM_DP_NOISE_KEY}"
mkdir -p "$out"
logs="$out/logs"; mkdir -p "$logs"

(cd "$here" && mvn -B -q package -DskipTests && mvn -B -q dependency:build-classpath -Dmdep.outputFile="$out/classpath.txt") >"$logs/mvn.log" 2>&1
cp_deps="$(cat "$out/classpath.txt")"
app_jar="$here/target/beam-dp-from-java-0.1.0.jar"
py_ext="$(tr ':' '\n' <<<"$cp_deps" | grep 'beam-sdks-java-extensions-python' | head -n 1)"

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("localhost", 0)); print(s.getsockname()[1])'; }
pool_port=$(free_port); exp_port=$(free_port); job_port=$(free_port); art_port=$(free_port); jexp_port=$(free_port)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_port() {
  for _ in $(seq 1 120); do
    "$python" -c "import socket,sys; socket.create_connection(('localhost', $1), 1)" 2>/dev/null && return 0
    sleep 1
  done
  echo "run.sh: nothing listening on port $1 (logs in $logs)" >&2; return 1
}

pybin="$(dirname "$(command -v "$python")")"
PATH="$pybin:$PATH" PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m apache_beam.runners.worker.worker_pool_main --service_port="$pool_port" \
  >"$logs/worker_pool.log" 2>&1 & pids+=($!)
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m apache_beam.runners.portability.expansion_service_main --port="$exp_port" \
  --fully_qualified_name_glob='beam_dp.*' --environment_type=EXTERNAL \
  --environment_config="localhost:$pool_port" --beam_dp_epsilon=1.0 \
  >"$logs/expansion_service.log" 2>&1 & pids+=($!)
java --add-opens=java.base/java.util=ALL-UNNAMED -cp "$jobserver:$app_jar:$py_ext" \
  org.apache.beam.runners.flink.FlinkJobServerDriver --flink-master='[local]' \
  --job-port="$job_port" --artifact-port="$art_port" --expansion-port="$jexp_port" \
  >"$logs/job_server.log" 2>&1 & pids+=($!)
wait_port "$pool_port"; wait_port "$exp_port"; wait_port "$job_port"

java -cp "$app_jar:$cp_deps" beamdp.xlang.CountFromJava --runner=PortableRunner \
  --jobEndpoint="localhost:$job_port" --defaultEnvironmentType=EMBEDDED \
  --pythonExpansionService="localhost:$exp_port" --output="$out/releases.csv" \
  >"$logs/java.log" 2>&1
echo "$out/releases.csv"
