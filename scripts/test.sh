#!/usr/bin/env bash
# Installs what the tests need into ./.venv and runs the whole suite: unit and Ray tests, the
# Jupyter server tests, the browser tests (system Chromium) and the example notebooks (nbval).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
  else
    echo "The browser tests need Chromium: run 'sudo apt-get install -y chromium' and try again." >&2
    exit 1
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test,lint]"
export RAY_USAGE_STATS_ENABLED=0
exec .venv/bin/python -m pytest --nbval-lax tests examples "$@"
