# Sourced by scripts/main and scripts/test: a project virtualenv, installed once per pyproject change.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[dev]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
# Dagster keeps its runs in .dagster_home/ (git-ignored); dagster.yaml must live there.
export DAGSTER_HOME="${DAGSTER_HOME:-$ROOT/.dagster_home}"
mkdir -p "$DAGSTER_HOME"
cp dagster.yaml "$DAGSTER_HOME/dagster.yaml"
# Offline, reproducible prices: never fetch litellm's cost map at import.
export LITELLM_LOCAL_MODEL_COST_MAP=True
