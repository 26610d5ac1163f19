#!/usr/bin/env bash
# Installs everything the tests need (apt, pip, npm) on a fresh Debian 12 machine and runs them.
# README.md names this script as THE test command; .ci/run calls exactly it.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
APT_PACKAGES=()   # grows as tests need real peers (zookeeper, kcat, ...)
if [ ${#APT_PACKAGES[@]} -gt 0 ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'

echo "== ruff";         .venv/bin/ruff check sofakafka tests bench tools
echo "== mypy";         .venv/bin/mypy
echo "== import-linter"; .venv/bin/lint-imports
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
