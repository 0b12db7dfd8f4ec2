#!/usr/bin/env bash
# Installs what the tests need into ./.venv and runs the whole suite: unit and Ray tests, the
# Jupyter server tests, the browser tests (system Chromium), a real SLURM and Grid Engine, test hosts in network
# namespaces with their own sshd, and the example notebooks (nbval).
set -euo pipefail
cd "$(dirname "$0")/.."

# The real parts the suite starts, and the Debian packages that bring them.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || missing+=(munge)
[ -x /usr/sbin/sge_qmaster ] || missing+=(gridengine-master)
[ -x /usr/sbin/sge_execd ] || missing+=(gridengine-exec)
command -v qsub >/dev/null 2>&1 || missing+=(gridengine-client)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  elif [[ " ${missing[*]} " == *" chromium "* ]]; then
    echo "The browser tests need Chromium: run 'sudo apt-get install -y ${missing[*]}' and try again." >&2
    exit 1
  else
    echo "Not installed: ${missing[*]} ('sudo apt-get install -y ${missing[*]}'); the SLURM, Grid" \
      "Engine and test-host tests skip without them (and without root)." >&2
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test,lint]"
export RAY_USAGE_STATS_ENABLED=0
exec .venv/bin/python -m pytest --nbval-lax --durations=25 tests examples "$@"
