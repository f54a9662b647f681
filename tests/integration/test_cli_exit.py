"""A command run as the process's own command (``nl2sql-assets configs ...``, ``pipeline run``,
``eval ...``) ends without the interpreter's teardown, and loses nothing the teardown would have
done: its output, the files it wrote, non-daemon threads, atexit handlers, its exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_COMMAND = """
import atexit, sys, threading, time
from pathlib import Path
out = Path(sys.argv[1])
atexit.register(lambda: print("atexit handler ran", flush=False))
def late() -> None:
    time.sleep(0.3)
    out.write_text("thread finished")
threading.Thread(target=late).start()
sys.argv = ["nl2sql-assets", *sys.argv[2:]]
from nl2sql_assets.cli import main
main()
print("not reached: main ends the process", flush=True)
"""


def _run(tmp_path: Path, dagster_home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _COMMAND, str(tmp_path / "thread.txt"), *argv],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env=dict(os.environ, DAGSTER_HOME=str(dagster_home)))


def test_a_dagster_command_exits_with_its_output_threads_and_atexit_handlers(
        tmp_path: Path, dagster_home: Path, demo_project: Path) -> None:
    done = _run(tmp_path, dagster_home, "--config", str(demo_project / "nl2sql.yaml"), "configs", "add", "plans")
    assert done.returncode == 0, done.stderr
    assert "config 'plans' (plans) registered" in done.stdout
    assert "atexit handler ran" in done.stdout  # buffered output flushed after the handlers
    assert "not reached" not in done.stdout
    assert (tmp_path / "thread.txt").read_text() == "thread finished"  # waited for, as at a normal exit

    listed = _run(tmp_path, dagster_home, "configs", "list")
    assert listed.returncode == 0 and listed.stdout.splitlines()[0] == "plans"


def test_a_dagster_command_keeps_its_exit_code(tmp_path: Path, dagster_home: Path, demo_project: Path) -> None:
    done = _run(tmp_path, dagster_home, "--config", str(demo_project / "nl2sql.yaml"), "configs", "add", "bad|name")
    assert done.returncode == 2
    assert "error:" in done.stderr and "atexit handler ran" in done.stdout


def test_a_command_without_dagster_exits_the_same_way_and_its_file_is_whole(
        tmp_path: Path, dagster_home: Path, demo_project: Path) -> None:
    out = tmp_path / "gold.jsonl"
    done = _run(tmp_path, dagster_home, "eval", "export", str(demo_project / "suites" / "chinook.yaml"),
                "--jsonl", str(out))
    assert done.returncode == 0, done.stderr
    assert "atexit handler ran" in done.stdout and "not reached" not in done.stdout
    assert (tmp_path / "thread.txt").read_text() == "thread finished"
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 10 and all(line.startswith("{") and line.endswith("}") for line in lines)
