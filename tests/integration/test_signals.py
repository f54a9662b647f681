"""Signals, as a process manager or ``command &`` from a script leaves them: SIGINT ignored. Every
process the product starts still stops on SIGTERM, and the product leaves a caller's signal
dispositions as it found them (an in-process Dagster run maps SIGTERM to SIGINT's handler)."""

from __future__ import annotations

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
