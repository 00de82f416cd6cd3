#!/usr/bin/env bash
# Fetch an Apache Kafka broker (KRaft mode capable) from Maven Central and print its lib dir.
#
#   bash .ci/fetch_kafka.sh        # -> <cache>/kafka/lib-<version>  (kafka_2.13 + runtime deps)
#
# There is no Kafka distribution tarball or Debian package reachable here, so the broker runs
# from the jars of org.apache.kafka:kafka_2.13 and its runtime dependencies (56 jars, ~45 MB),
# with main classes kafka.tools.StorageTool (format the KRaft log dir) and kafka.Kafka.
# tests/integration/kafka_broker.py starts and stops it on 127.0.0.1.
#
# Env: BEAM_DP_CACHE (default $HOME/.cache/beam_dp), BEAM_DP_KAFKA_VERSION (default 3.7.2).
# Idempotent: an already fetched lib dir is reused without touching the network.
# Exit codes: 0 = lib dir printed; 2 = not obtainable from the registry; 1 = other error.
set -uo pipefail

VERSION="${BEAM_DP_KAFKA_VERSION:-3.7.2}"
CACHE="${BEAM_DP_CACHE:-$HOME/.cache/beam_dp}"
LIB="$CACHE/kafka/lib-$VERSION"

if [[ -s "$LIB/kafka_2.13-$VERSION.jar" && -f "$LIB/.complete" ]]; then echo "$LIB"; exit 0; fi
command -v mvn >/dev/null 2>&1 || { echo "fetch_kafka.sh: mvn not found on PATH" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>beam_dp</groupId><artifactId>kafka-broker</artifactId><version>1</version>
<dependencies>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
</dependencies></project>
POM
echo "fetch_kafka.sh: mvn copy-dependencies org.apache.kafka:kafka_2.13:$VERSION -> $LIB" >&2
rm -rf "$LIB.tmp"
if (cd "$work" && mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
      -DoutputDirectory="$LIB.tmp" -DincludeScope=runtime >"$work/log" 2>&1); then
  rm -rf "$LIB" && mv "$LIB.tmp" "$LIB" && touch "$LIB/.complete"
  echo "$LIB"; exit 0
fi
grep -m1 -o 'Could not find artifact[^ ]* [^ ]*\|Could not resolve[^[]*' "$work/log" >&2 || tail -n 5 "$work/log" >&2
rm -rf "$LIB.tmp"
exit 2
