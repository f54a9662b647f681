"""Signals, as a process manager or ``command &`` from a script leaves them: SIGINT ignored. Every
process the product starts still stops on SIGTERM, and the product leaves a caller's signal
dispositions as it found them (an in-process Dagster run maps SIGTERM to SIGINT's handler)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from nl2sql_assets.signals import dispositions_kept

REPO = Path(__file__).resolve().parents[2]


def test_an_in_process_dagster_run_leaves_the_signals_as_it_found_them() -> None:
    @dg.asset
    def one() -> int:
        return 1

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job has it (the fixture restores it)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with dispositions_kept():
        assert dg.materialize([one]).success
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def _ignore_stopping() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def test_serve_stops_on_sigterm_though_its_parent_ignored_it(demo_project: Path) -> None:
    process = subprocess.Popen([sys.executable, "-m", "nl2sql_assets.cli", "--config", str(demo_project), "serve",
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_ignore_stopping)
    try:
        assert process.stdout is not None and process.stdout.readline().startswith("serving the built-in engine")
        process.terminate()
        assert process.wait(timeout=10) == -signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.slow
def test_the_tests_pass_started_with_sigint_ignored() -> None:
    """The reproduction: pytest started as a background job starts it, on tests that run Dagster in
    process and then start servers they stop with SIGTERM."""
    code = ("import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "sys.exit(subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', "
            "'-o', 'addopts=', 'tests/dagster/test_automation.py', 'tests/unit/test_engines.py']).returncode)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def _tree(root: int) -> set[int]:
    """``root`` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += children.get(pid, [])
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_the_ui_stops_its_whole_tree_on_a_signal(demo_project: Path, tmp_path: Path, sig: signal.Signals,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``nl2sql-assets ui`` in a demo folder, DAGSTER_HOME unset: the project's own .dagster_home is
    used (said first); a signal to the command stops dagster dev, its webserver, daemon and code
    servers; no process is left and the port is free again."""
    import socket
    import time

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "ui.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "nl2sql_assets.cli", "ui", "--port", str(port)],
                               cwd=demo_project, stdout=log, stderr=subprocess.STDOUT,
                               preexec_fn=_ignore_stopping)
    tree: set[int] = set()
    try:
        for _ in range(240):  # until the UI answers (dagster dev starts its servers)
            text = (tmp_path / "ui.log").read_text()
            if "Dagster UI ready" in text or process.poll() is not None:
                break
            time.sleep(0.25)
        assert "Dagster UI ready" in text, text[-3000:]
        assert text.splitlines()[0].startswith("DAGSTER_HOME is not set: this project's Dagster runs are kept in "
                                               f"{demo_project / '.dagster_home'}")
        assert (demo_project / ".dagster_home" / "dagster.yaml").is_file()
        assert ".dagster_home/" in (demo_project / ".gitignore").read_text().splitlines()
        tree = _tree(process.pid)
        assert len(tree) >= 4  # the command, dagster dev, its webserver and daemon (and code servers)
        process.send_signal(sig)
        process.wait(timeout=15)
        for _ in range(60):
            if not _alive(tree):
                break
            time.sleep(0.25)
        assert _alive(tree) == set()
        with socket.socket() as s:
            # nothing listens on the port any more (a closed connection may linger in TIME_WAIT a
            # while, which SO_REUSEADDR lets a new listener past, as the UI's own server does)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen()
    finally:
        for pid in _alive(tree | {process.pid}):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        log.close()


def test_a_demo_folder_runs_alone_without_dagster_home(demo_project: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A project folder keeps its Dagster runs in its own .dagster_home/ when DAGSTER_HOME is not
    set (its dagster.yaml written there, the folder ignored by git), and says so first."""
    from nl2sql_assets.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.chdir(demo_project)
    assert main(["configs", "list"]) == 0
    err = capsys.readouterr().err
    home = demo_project / ".dagster_home"
    assert err.splitlines()[0] == (f"DAGSTER_HOME is not set: this project's Dagster runs are kept in {home} (its "
                                   "dagster.yaml written there on first use; set DAGSTER_HOME to keep them elsewhere)")
    settings = (home / "dagster.yaml").read_text(encoding="utf-8")
    assert "nux:" in settings and "KeptEngineSqliteStorage" in settings
    assert (demo_project / ".gitignore").read_text(encoding="utf-8").splitlines().count(".dagster_home/") == 1
    assert main(["configs", "list"]) == 0  # again: the same home, the .gitignore line once
    assert (demo_project / ".gitignore").read_text(encoding="utf-8").splitlines().count(".dagster_home/") == 1
