#!/usr/bin/env bash
# Build Beam's Prism runner (Go) from the Go module proxy and print the binary path.
#
#   bash .ci/build_prism.sh            # -> <cache>/bin/prism
#
# Cache dir: ${BEAM_DP_CACHE:-$HOME/.cache/beam_dp}; Beam version: ${BEAM_DP_BEAM_VERSION:-2.77.0}.
# Idempotent: if the binary exists and reports nothing odd, it is reused (delete it to rebuild).
# The Python PrismRunner would otherwise try to download a release zip from GitHub, which is not
# reachable here; point it at this binary with --prism_location=<path> (tests/runners.py does).
# Takes ~1-2 min on 2 cores the first time (module downloads + compile); ~66 MB binary.
set -euo pipefail

BEAM_VERSION="${BEAM_DP_BEAM_VERSION:-2.77.0}"
CACHE="${BEAM_DP_CACHE:-$HOME/.cache/beam_dp}"
BIN_DIR="$CACHE/bin"
BIN="$BIN_DIR/prism"
STAMP="$BIN_DIR/.prism-version"

if [[ -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$BEAM_VERSION" ]]; then
  echo "$BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build_prism.sh: 'go' not found on PATH; cannot build Prism" >&2
  exit 1
fi

mkdir -p "$BIN_DIR"
echo "build_prism.sh: building prism@v$BEAM_VERSION into $BIN_DIR" >&2
GOBIN="$BIN_DIR" go install "github.com/apache/beam/sdks/v2/go/cmd/prism@v$BEAM_VERSION" >&2
echo "$BEAM_VERSION" > "$STAMP"
echo "$BIN"
