#!/usr/bin/env bash
# A real local Flink 1.19 session cluster: JobManager and TaskManager as two separate JVMs, plus
# (optionally) a Python SDK worker pool, all on 127.0.0.1.
#
#   bash .ci/flink_cluster.sh start    # REST on 127.0.0.1:${BEAM_DP_FLINK_REST_PORT:-8081}
#   bash .ci/flink_cluster.sh status
#   bash .ci/flink_cluster.sh stop
#
# There is no flink-dist on the reachable Maven Central (404), so the cluster runs from the same
# jars as the Beam job server: <cache>/flink/lib-2.62.0 (fetched by fetch_flink_job_server.sh:
# flink-runtime / flink-clients / flink-streaming-java 1.19.0 + beam-runners-flink-1.19 2.62.0).
# Beam's classes being on the cluster's class path is what makes the *thin* job server jar
# (manifest-only) usable against a remote cluster: the jar it uploads holds no classes.
# Logging: slf4j 1.7 with no binding (NOP); the JVMs' stdout/stderr go to <cache>/flink-cluster/.
#
# Submit a Beam job to it:  --runner=FlinkRunner --flink_master=127.0.0.1:8081 --parallelism=2
#   and, for one Python process per Flink worker (LOOPBACK shares one process and its GIL):
#   --environment_type=EXTERNAL --environment_config=127.0.0.1:${BEAM_DP_WORKER_POOL_PORT:-50000}
#   --sdk_worker_parallelism=2   (start with BEAM_DP_WORKER_POOL=1 to get the worker pool)
#
# Env: BEAM_DP_CACHE, BEAM_DP_FLINK_SLOTS (default 2), BEAM_DP_FLINK_REST_PORT (8081),
#      BEAM_DP_WORKER_POOL=1 (also start python -m apache_beam.runners.worker.worker_pool_main),
#      BEAM_DP_WORKER_POOL_PORT (50000), BEAM_DP_PYTHON (python for the worker pool, default python3)
#      BEAM_DP_FLINK_CLUSTER_RUN (run dir, default <cache>/flink-cluster), BEAM_DP_FLINK_RPC_PORT
#      (6123), BEAM_DP_FLINK_BLOB_PORT (6124), BEAM_DP_FLINK_CONF_EXTRA (lines appended to the conf)
#      BEAM_DP_FLINK_TM_HEAP (TaskManager -Xms/-Xmx, default 896m; raise taskmanager.memory.task.heap.size
#      with it through BEAM_DP_FLINK_CONF_EXTRA: a later line of the conf wins),
#      BEAM_DP_FLINK_TM_METASPACE (TaskManager metaspace, default 768m: every job and every restart
#      of a job loads the Kafka IO and Beam classes again in its own class loader; at 256m a CI
#      run's third restart-test job failed with OutOfMemoryError: Metaspace)
set -euo pipefail

CACHE="${BEAM_DP_CACHE:-$HOME/.cache/beam_dp}"
LIB="${BEAM_DP_FLINK_CLUSTER_LIB:-$CACHE/flink/lib-2.62.0}"
RUN="${BEAM_DP_FLINK_CLUSTER_RUN:-$CACHE/flink-cluster}"
SLOTS="${BEAM_DP_FLINK_SLOTS:-2}"
REST_PORT="${BEAM_DP_FLINK_REST_PORT:-8081}"
POOL_PORT="${BEAM_DP_WORKER_POOL_PORT:-50000}"
RPC_PORT="${BEAM_DP_FLINK_RPC_PORT:-6123}"
BLOB_PORT="${BEAM_DP_FLINK_BLOB_PORT:-6124}"
PY="${BEAM_DP_PYTHON:-python3}"

# Java 17: the --add-opens/--add-exports Flink 1.19's own scripts pass (env.java.opts.all).
JAVA_OPENS=(
  --add-exports=java.base/sun.net.util=ALL-UNNAMED
  --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED
  --add-opens=java.base/java.lang=ALL-UNNAMED
  --add-opens=java.base/java.net=ALL-UNNAMED
  --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/java.nio=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens=java.base/java.text=ALL-UNNAMED
  --add-opens=java.base/java.time=ALL-UNNAMED
  --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED
)

write_conf() {
  mkdir -p "$RUN/conf"
  cat > "$RUN/conf/flink-conf.yaml" <<CONF
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $RPC_PORT
jobmanager.bind-host: 127.0.0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $REST_PORT
blob.server.port: $BLOB_PORT
taskmanager.host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
taskmanager.numberOfTaskSlots: $SLOTS
parallelism.default: 1
jobmanager.memory.process.size: 1024m
jobmanager.memory.heap.size: 512m
jobmanager.memory.off-heap.size: 128m
jobmanager.memory.jvm-metaspace.size: 256m
jobmanager.memory.jvm-overhead.min: 128m
jobmanager.memory.jvm-overhead.max: 128m
taskmanager.cpu.cores: $SLOTS
taskmanager.memory.framework.heap.size: 128m
taskmanager.memory.task.heap.size: 768m
taskmanager.memory.framework.off-heap.size: 128m
taskmanager.memory.task.off-heap.size: 64m
taskmanager.memory.network.min: 64m
taskmanager.memory.network.max: 64m
taskmanager.memory.managed.size: 128m
taskmanager.memory.jvm-metaspace.size: ${BEAM_DP_FLINK_TM_METASPACE:-768m}
taskmanager.memory.jvm-overhead.min: 192m
taskmanager.memory.jvm-overhead.max: 192m
io.tmp.dirs: $RUN/tmp
web.tmpdir: $RUN/tmp
${BEAM_DP_FLINK_CONF_EXTRA:-}
CONF
  mkdir -p "$RUN/tmp"
}

alive() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

start_jvm() {  # name main-class heap direct metaspace
  local name=$1 main=$2 heap=$3 direct=$4 metaspace=$5
  if alive "$name"; then echo "flink_cluster.sh: $name already running (pid $(cat "$RUN/$name.pid"))" >&2; return; fi
  nohup java -Xms"$heap" -Xmx"$heap" -XX:MaxDirectMemorySize="$direct" -XX:MaxMetaspaceSize="$metaspace" \
    "${JAVA_OPENS[@]}" -cp "$LIB/*" "$main" --configDir "$RUN/conf" \
    >"$RUN/$name.log" 2>&1 </dev/null &
  echo $! > "$RUN/$name.pid"
}

rest_up() { curl -sf "http://127.0.0.1:$REST_PORT/overview" 2>/dev/null; }

cmd_start() {
  [[ -d "$LIB" ]] || { echo "flink_cluster.sh: $LIB missing; run: bash .ci/fetch_flink_job_server.sh" >&2; exit 2; }
  command -v java >/dev/null || { echo "flink_cluster.sh: java not found" >&2; exit 2; }
  mkdir -p "$RUN"; write_conf
  start_jvm jobmanager org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint 640m 128m 256m
  start_jvm taskmanager org.apache.flink.runtime.taskexecutor.TaskManagerRunner "${BEAM_DP_FLINK_TM_HEAP:-896m}" 256m \
    "${BEAM_DP_FLINK_TM_METASPACE:-768m}"
  if [[ "${BEAM_DP_WORKER_POOL:-0}" == 1 ]] && ! alive workerpool; then
    nohup "$PY" -m apache_beam.runners.worker.worker_pool_main --service_port="$POOL_PORT" \
      >"$RUN/workerpool.log" 2>&1 </dev/null &
    echo $! > "$RUN/workerpool.pid"
  fi
  for _ in $(seq 1 120); do
    out=$(rest_up || true)
    if [[ "$out" == *'"taskmanagers":1'* ]]; then
      echo "flink_cluster.sh: up: http://127.0.0.1:$REST_PORT $out" >&2
      echo "127.0.0.1:$REST_PORT"; return 0
    fi
    for n in jobmanager taskmanager; do
      alive "$n" || { echo "flink_cluster.sh: $n died:" >&2; tail -n 30 "$RUN/$n.log" >&2; cmd_stop; exit 1; }
    done
    sleep 1
  done
  echo "flink_cluster.sh: not up after 120 s; see $RUN/*.log" >&2; tail -n 20 "$RUN"/*.log >&2; cmd_stop; exit 1
}

cmd_stop() {
  for n in workerpool taskmanager jobmanager; do
    if alive "$n"; then
      pid=$(cat "$RUN/$n.pid"); kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$RUN/$n.pid"
  done
  echo "flink_cluster.sh: stopped" >&2
}

cmd_status() {
  for n in jobmanager taskmanager workerpool; do
    if alive "$n"; then echo "$n: running (pid $(cat "$RUN/$n.pid"))"; else echo "$n: stopped"; fi
  done
  rest_up && echo || true
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 64 ;;
esac
