"""``nl2sql-assets ui``: ``dagster dev`` for this project, with a line that says when the UI is
ready and a terminal at one log level for everything (webserver, daemon and the runs launched
from the UI).

Why a wrapper: at ``--log-level warning`` Dagster prints nothing once the UI is up, and a run
launched from the UI still writes its DEBUG events to the terminal (a run's console logger takes
its level from the run's config or the instance's ``python_log_level``; that setting also drops
INFO messages from the run's event log, which the UI shows). Here the terminal is filtered by
level, line by line; the event log and the captured step output keep everything.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from nl2sql_assets.instance import dagster_home
from nl2sql_assets.signals import STOPPING, child_defaults, dispositions_kept

LEVELS = ("debug", "info", "warning", "error", "critical")
_RANK = {name.upper(): n for n, name in enumerate(LEVELS)}
# Dagster's log lines (webserver, daemon, code server, a run's console logger):
# "2026-12-04 18:33:37 +0000 - dagster - DEBUG - ..."
_HEADER = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4} - [^\n]*? - "
                     r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) - ")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUPERSESSION_FILTER = "ignore:Function `dev_command` is superseded:FutureWarning"
READY_TIMEOUT_S = 180.0


class LevelFilter:
    """Keeps a log line at or above ``level``; a line that is not a log record's first line (a
    traceback, a message's second line) follows the record it belongs to, and anything printed
    before the first record is kept."""

    def __init__(self, level: str) -> None:
        self.threshold = _RANK[level.upper()]
        self.keeping = True

    def keep(self, line: str) -> bool:
        match = _HEADER.match(_ANSI.sub("", line))
        if match:
            self.keeping = _RANK[match.group(1)] >= self.threshold
        return self.keeping


def workspace_yaml(config_path: Path) -> str:
    """The code location (its name is the one runs are filed under), run from the project folder."""
    from nl2sql_assets.defs.keys import CODE_LOCATION

    return ("load_from:\n  - python_module:\n      module_name: nl2sql_assets.definitions\n"
            f"      working_directory: {_yaml_str(str(config_path.parent))}\n"
            f"      location_name: {CODE_LOCATION}\n")


def _yaml_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def dagster_dev_command(workspace: Path, level: str, host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "--log-level", level,
            "-h", host, "-p", str(port)]


def dagster_dev_env(config_path: Path) -> dict[str, str]:
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), SUPERSESSION_FILTER]))
    return dict(os.environ, NL2SQL_PROJECT=str(config_path), PYTHONUNBUFFERED="1", PYTHONWARNINGS=warnings,
                LITELLM_LOCAL_MODEL_COST_MAP="True")


def copy_filtered(lines: Iterable[str], keep: LevelFilter, out: IO[str]) -> None:
    for line in lines:
        if keep.keep(line):
            out.write(line)
            out.flush()


def wait_until_ready(url: str, process: subprocess.Popen, timeout_s: float = READY_TIMEOUT_S) -> bool:
    """True once the webserver answers ``/server_info``; False if ``dagster dev`` exits first or
    ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.25)
    return False


def run_ui(config_path: Path, level: str = "warning", host: str = "127.0.0.1", port: int = 3000,
           out: IO[str] | None = None) -> int:
    """Start ``dagster dev`` on the project, print one line when the UI answers, pass on the
    output at ``level`` and above; Ctrl-C stops it. Returns ``dagster dev``'s exit status."""
    from nl2sql_assets.project import load_project_config

    out = out or sys.stdout
    config_path = config_path.resolve()
    load_project_config(config_path)  # a missing or broken config says so here, not in the UI's log
    _, said = dagster_home(config_path.parent)  # $DAGSTER_HOME, else the project's own .dagster_home/
    if said:
        out.write(said + "\n")
        out.flush()
    with tempfile.TemporaryDirectory(prefix="nl2sql-ui-") as tmp:
        workspace = Path(tmp) / "workspace.yaml"
        workspace.write_text(workspace_yaml(config_path), encoding="utf-8")
        # A process group of its own, begun with the stopping signals at their defaults: whatever
        # stops this command (Ctrl-C, SIGTERM, SIGHUP) stops the whole tree (``_stop``)
        process = subprocess.Popen(
            dagster_dev_command(workspace, level, host, port), cwd=config_path.parent, env=dagster_dev_env(config_path),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            errors="replace", bufsize=1, start_new_session=True, preexec_fn=child_defaults)
        assert process.stdout is not None
        reader = threading.Thread(target=copy_filtered, args=(process.stdout, LevelFilter(level), out), daemon=True)
        reader.start()
        url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        try:
            with dispositions_kept():
                for sig in STOPPING:  # each ends the wait below as Ctrl-C does
                    signal.signal(sig, signal.default_int_handler)
                code = _serve(url, process, level, config_path, out)
        except KeyboardInterrupt:
            code = _stop(process)
        reader.join(timeout=5)
        return code


def _serve(url: str, process: subprocess.Popen, level: str, config_path: Path, out: IO[str]) -> int:
    """Say when the UI answers, then wait for ``dagster dev`` to end."""
    if wait_until_ready(url, process):
        out.write(f"Dagster UI ready: {url}  (project {config_path}; the terminal shows {level.upper()} "
                  "and above, the UI every event; Ctrl-C stops it)\n")
        out.flush()
    elif process.poll() is None:
        out.write(f"dagster dev is not answering at {url} after {READY_TIMEOUT_S:.0f} s; still waiting "
                  "(Ctrl-C stops it)\n")
        out.flush()
    return process.wait()


def _stop(process: subprocess.Popen, grace_s: float = 12.0) -> int:
    """After Ctrl-C, SIGTERM or SIGHUP: Ctrl-C to ``dagster dev``'s whole process group (it stops
    its webserver, daemon and code servers), then, past ``grace_s``, SIGKILL to what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        code = process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        code = None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever of the group outlived dagster dev
    return code if code is not None else process.wait()
