#!/usr/bin/env bash
# Static checks of the Dataflow deployment artefacts (terraform/ and pipelines/Dockerfile).
#
#   .ci/terraform_checks.sh
#
# 1. terraform fmt -check (skipped with a notice if the terraform binary is absent);
# 2. checkov on terraform/ and on pipelines/Dockerfile with terraform/.checkov.yaml.
# checkov is installed with pip into its own virtualenv (CHECKOV_VENV, default .cache/checkov-venv)
# when it is not on PATH: its pinned dependencies conflict with apache-beam's, so it must not
# share the project environment. Exits non-zero on the first failing check.
set -euo pipefail

cd "$(dirname "$0")/.."

status=0

if command -v terraform >/dev/null 2>&1; then
  echo "== terraform fmt -check -recursive terraform"
  terraform fmt -check -recursive terraform || status=1
else
  echo "== terraform not found; skipping terraform fmt -check"
fi

if command -v checkov >/dev/null 2>&1; then
  CHECKOV=checkov
else
  CHECKOV_VENV="${CHECKOV_VENV:-.cache/checkov-venv}"
  if [[ ! -x "${CHECKOV_VENV}/bin/checkov" ]]; then
    echo "== installing checkov into ${CHECKOV_VENV}"
    python3 -m venv "${CHECKOV_VENV}"
    "${CHECKOV_VENV}/bin/pip" install --quiet checkov
  fi
  CHECKOV="${CHECKOV_VENV}/bin/checkov"
fi

echo "== checkov -d terraform --config-file terraform/.checkov.yaml"
"${CHECKOV}" -d terraform --config-file terraform/.checkov.yaml || status=1

echo "== checkov -f pipelines/Dockerfile --config-file terraform/.checkov.yaml"
"${CHECKOV}" -f pipelines/Dockerfile --config-file terraform/.checkov.yaml || status=1

exit "${status}"
