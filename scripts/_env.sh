# Sourced by scripts/main and scripts/test, or by hand (`source scripts/_env.sh`) before
# `dagster dev`: a project virtualenv, installed once per pyproject.toml change, and the
# variables Dagster and litellm need. It sets no shell options and leaves the shell in the
# folder it was in (every path below is the checkout's, written out), so an interactive shell
# that sources it behaves as before.
_nl2sql_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$_nl2sql_root/.venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$_nl2sql_root/.venv" || return 1
fi
_nl2sql_stamp="$_nl2sql_root/.venv/.installed-$(sha256sum "$_nl2sql_root/pyproject.toml" | cut -c1-16)"
if [ ! -f "$_nl2sql_stamp" ]; then
  # pip's own output (hundreds of lines) goes to a log; a line before and after says what happens.
  echo "Installing nl2sql-assets and its dependencies into .venv/ (once per pyproject.toml change," \
       "1-3 minutes; log: .venv/install.log) ..." >&2
  _nl2sql_started=$SECONDS
  if ! { "$_nl2sql_root/.venv/bin/python" -m pip install --upgrade pip \
         && "$_nl2sql_root/.venv/bin/python" -m pip install -e "$_nl2sql_root[dev]"; } \
      > "$_nl2sql_root/.venv/install.log" 2>&1; then
    tail -n 15 "$_nl2sql_root/.venv/install.log" >&2
    echo "error: installing the project failed; the whole log is .venv/install.log" >&2
    return 1
  fi
  rm -f "$_nl2sql_root"/.venv/.installed-*
  touch "$_nl2sql_stamp"
  echo "Installed in $((SECONDS - _nl2sql_started)) s." >&2
fi
export PATH="$_nl2sql_root/.venv/bin:$PATH"
# Dagster keeps its runs in .dagster_home/ (git-ignored) and reads dagster.yaml from there.
export DAGSTER_HOME="${DAGSTER_HOME:-$_nl2sql_root/.dagster_home}"
mkdir -p "$DAGSTER_HOME" && cp "$_nl2sql_root/scripts/dagster.yaml" "$DAGSTER_HOME/dagster.yaml" || return 1
# `dagster dev` warns that `dg dev` supersedes it. dg (dagster-dg-cli) pins an exact dagster
# patch version that is not the one this project pins, so `dagster dev` stays the command: this
# ignores that one warning and nothing else.
_nl2sql_ignore='ignore:Function `dev_command` is superseded:FutureWarning'
case ",${PYTHONWARNINGS:-}," in
  *",$_nl2sql_ignore,"*) ;;
  *) export PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}$_nl2sql_ignore" ;;
esac
# Offline, reproducible prices: never fetch litellm's cost map at import.
export LITELLM_LOCAL_MODEL_COST_MAP=True
unset _nl2sql_root _nl2sql_stamp _nl2sql_started _nl2sql_ignore
