#!/usr/bin/env bash
# Builds the docs site (Sphinx, MyST, myst-nb, furo) into docs/_build/html with warnings as
# errors: a broken link, reference or docstring fails the build. The notebooks are rendered
# with the outputs they store (nothing is executed) and nothing is fetched from the network.
# Installs the `docs` extra into .venv when it is missing. .ci/run calls this after lint.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || python3 -m venv .venv
if ! "$PY" -c "import sphinx, myst_nb, furo, sphinx_copybutton" 2>/dev/null; then
  "$PY" -m pip install -q -e ".[docs]"
fi
export RAY_USAGE_STATS_ENABLED=0
exec "$PY" -m sphinx -W --keep-going -b html docs docs/_build/html "$@"
