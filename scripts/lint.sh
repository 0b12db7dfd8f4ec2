#!/usr/bin/env bash
# The lint policy, as CI runs it (.ci/run calls this before the tests): ruff (rules and format),
# mypy, the doctests of the pure modules, and prettier + eslint on the panel's TypeScript.
# Every step runs; the script fails if any step found something. Config: pyproject.toml
# ([tool.ruff], [tool.mypy], [tool.eugo.doctests]) and labextension/package.json.
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
if ! "$PY" -c "import ruff, mypy" 2>/dev/null; then
  "$PY" -m pip install -q -e ".[lint]"
fi
PATH="$(cd "$(dirname "$PY")" && pwd):$PATH"
export PATH  # jlpm comes with JupyterLab in the same environment

failed=()
step() {
  local name=$1
  shift
  echo "== $name"
  if ! "$@"; then
    failed+=("$name")
  fi
}

doctest_modules() {
  "$PY" - <<'PYTHON'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["tool"]["eugo"]["doctests"]["modules"]))
PYTHON
}

mapfile -t DOCTESTS < <(doctest_modules)

step "ruff check" "$PY" -m ruff check .
step "ruff format --check" "$PY" -m ruff format --check .
step "mypy" "$PY" -m mypy
step "doctests" env RAY_USAGE_STATS_ENABLED=0 "$PY" -m pytest -q -p no:cacheprovider \
  --doctest-modules "${DOCTESTS[@]}"
if [ ! -d labextension/node_modules ]; then
  (cd labextension && jlpm install)
fi
step "prettier + eslint (labextension)" bash -c "cd labextension && jlpm run lint:check"

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: findings in: ${failed[*]}" >&2
  exit 1
fi
echo "lint: clean"
