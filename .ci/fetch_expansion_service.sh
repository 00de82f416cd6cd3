#!/usr/bin/env bash
# Assemble Beam's Kafka expansion service (Java, cross-language) from Maven Central jars, the way
# fetch_flink_job_server.sh assembles the job server, and print the expansion service jar.
#
#   bash .ci/fetch_expansion_service.sh
#   # -> <cache>/kafka-xlang/beam-sdks-java-io-kafka-expansion-service-<beam>-thin.jar
#
# The reachable Maven Central has no org.apache.beam:beam-sdks-java-io-expansion-service for the
# Python SDK's version (2.77.0; its maven-metadata lists 2.33.0, 2.34.0, 2.43.0 only), but it has
# beam-sdks-java-io-kafka and beam-sdks-java-expansion-service 2.62.0, the version of the Flink
# job server. This script builds, under <cache>/kafka-xlang/:
#   lib-<beam>/                                   io-kafka + expansion-service + kafka-clients and
#                                                 their runtime deps (io.confluent excluded: not on
#                                                 Maven Central, only needed for schema registries)
#   beam-sdks-java-io-kafka-expansion-service-<beam>-thin.jar
#                                                 manifest-only jar, Main-Class ExpansionService
#   beam-runners-flink-1.19-job-server-<beam>-kafka-thin.jar
#                                                 the job server of fetch_flink_job_server.sh plus
#                                                 the Kafka IO jars (the Java Kafka read/write run
#                                                 inside the Flink JVM: environment EMBEDDED)
#   flink-lib/                                    symlinks: Flink job server lib + the Kafka IO
#                                                 jars, for BEAM_DP_FLINK_CLUSTER_LIB (session
#                                                 cluster of .ci/flink_cluster.sh)
#
# Env: BEAM_DP_CACHE, BEAM_DP_XLANG_BEAM_VERSION (2.62.0), BEAM_DP_KAFKA_VERSION (3.7.2: the
# kafka-clients; beam-sdks-java-io-kafka declares it "provided").
# Idempotent. Exit codes: 0 = jar printed; 2 = not obtainable; 1 = other error.
set -uo pipefail

BEAM="${BEAM_DP_XLANG_BEAM_VERSION:-2.62.0}"
KAFKA="${BEAM_DP_KAFKA_VERSION:-3.7.2}"
CACHE="${BEAM_DP_CACHE:-$HOME/.cache/beam_dp}"
OUT="$CACHE/kafka-xlang"
FLINK_LIB="$CACHE/flink/lib-$BEAM"
EXP_JAR="$OUT/beam-sdks-java-io-kafka-expansion-service-$BEAM-thin.jar"
JS_JAR="$OUT/beam-runners-flink-1.19-job-server-$BEAM-kafka-thin.jar"

if [[ -s "$EXP_JAR" && -s "$JS_JAR" && -d "$OUT/flink-lib" ]]; then echo "$EXP_JAR"; exit 0; fi
[[ -d "$FLINK_LIB" ]] || { echo "fetch_expansion_service.sh: $FLINK_LIB missing; run .ci/fetch_flink_job_server.sh first" >&2; exit 2; }
command -v mvn >/dev/null 2>&1 || { echo "fetch_expansion_service.sh: mvn not found on PATH" >&2; exit 1; }

mkdir -p "$OUT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
lib="$OUT/lib-$BEAM"
if [[ ! -f "$lib/.complete" || ! -f "$lib/jamm-0.4.0.jar" ]]; then
  cat > "$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>beam_dp</groupId><artifactId>kafka-expansion-service</artifactId><version>2</version>
<dependencies>
<dependency><groupId>org.apache.beam</groupId><artifactId>beam-sdks-java-io-kafka</artifactId><version>$BEAM</version>
<exclusions><exclusion><groupId>io.confluent</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
<dependency><groupId>org.apache.beam</groupId><artifactId>beam-sdks-java-expansion-service</artifactId><version>$BEAM</version></dependency>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$KAFKA</version></dependency>
<dependency><groupId>com.github.jbellis</groupId><artifactId>jamm</artifactId><version>0.4.0</version></dependency>
</dependencies></project>
POM
  echo "fetch_expansion_service.sh: mvn copy-dependencies beam-sdks-java-io-kafka:$BEAM -> $lib" >&2
  rm -rf "$lib.tmp"
  if ! (cd "$work" && mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DoutputDirectory="$lib.tmp" -DincludeScope=runtime >"$work/log" 2>&1); then
    grep -m1 -o 'Could not find artifact[^ ]* [^ ]*\|Could not resolve[^[]*' "$work/log" >&2 || tail -n 5 "$work/log" >&2
    rm -rf "$lib.tmp"; exit 2
  fi
  rm -rf "$lib" && mv "$lib.tmp" "$lib" && touch "$lib/.complete"
fi

# flink-lib: the job server's lib plus every jar of the Kafka IO lib whose artifact the job
# server's lib does not have (so no artifact is there in two versions): beam-sdks-java-io-kafka,
# kafka-clients, spring-expression (KafkaIO's SpEL topic names), jamm (a "provided" dependency of
# the Java SDK harness, which runs the Kafka read/write in the Flink JVM), ...
rm -rf "$OUT/flink-lib.tmp" && mkdir -p "$OUT/flink-lib.tmp"
ln -s "$FLINK_LIB"/*.jar "$OUT/flink-lib.tmp/"
artifact() { basename "$1" .jar | sed -E 's/-[0-9][^-]*(-[A-Za-z0-9.]+)*$//'; }
have=" $(for j in "$FLINK_LIB"/*.jar; do artifact "$j"; done | tr '\n' ' ') "
for j in "$lib"/*.jar; do
  [[ "$have" == *" $(artifact "$j") "* ]] || ln -s "$j" "$OUT/flink-lib.tmp/"
done
rm -rf "$OUT/flink-lib" && mv "$OUT/flink-lib.tmp" "$OUT/flink-lib"

python3 - "$OUT" "lib-$BEAM" "$EXP_JAR" "$JS_JAR" <<'PY'
import os, sys, zipfile
out, libdir, exp_jar, js_jar = sys.argv[1:]
def wrap(line):
    b = line.encode(); parts = [b[:72]]; b = b[72:]
    while b:
        parts.append(b' ' + b[:71]); b = b[71:]
    return b'\r\n'.join(parts) + b'\r\n'
def thin(path, main, entries):
    mf = (b'Manifest-Version: 1.0\r\n' + wrap('Main-Class: ' + main)
          + wrap('Class-Path: ' + ' '.join(entries)) + b'\r\n')
    with zipfile.ZipFile(path + '.tmp', 'w') as z:
        z.writestr('META-INF/MANIFEST.MF', mf)
    os.replace(path + '.tmp', path)
own = sorted(j for j in os.listdir(os.path.join(out, libdir)) if j.endswith('.jar'))
thin(exp_jar, 'org.apache.beam.sdk.expansion.service.ExpansionService',
     [libdir + '/' + j for j in own])
flink = sorted(j for j in os.listdir(os.path.join(out, 'flink-lib')) if j.endswith('.jar'))
thin(js_jar, 'org.apache.beam.runners.flink.FlinkJobServerDriver', ['flink-lib/' + j for j in flink])
PY
echo "$EXP_JAR"
