"""Worker processes never outlive the process that started them, however it ends, and a process
is forked only where nothing but its own thread runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from nl2sql_assets.forking import fork_is_safe
from tests.processes import alive, kill_all, start, still_alive, stop

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; fork is Linux-only here")

#: A parent that starts workers the product's way, prints their pids, and waits to be killed.
PARENT = textwrap.dedent("""
    import multiprocessing, sys, time
    from nl2sql_assets.forking import exit_with_parent, process_pool

    def idle() -> None:
        exit_with_parent()
        time.sleep(120)

    def square(x: int) -> int:
        return x * x

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        pool = process_pool(2, context=context)
        assert list(pool.map(square, range(4))) == [0, 1, 4, 9]  # the pool's workers are up
        lone = context.Process(target=idle, daemon=True)
        lone.start()
        print(" ".join(str(p) for p in [*pool._processes, lone.pid]), flush=True)
        time.sleep(120)
""")



@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_workers_end_when_their_parent_is_killed(tmp_path: Path, context: str, how: signal.Signals) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT, encoding="utf-8")
    parent = start([sys.executable, str(script), context], stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        assert parent.stdout is not None
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert len(workers) == 3 and all(alive(p) for p in workers)
        parent.send_signal(how)  # no handler, no clean-up: the workers' queues are never closed
        parent.wait(timeout=30)
        assert still_alive(workers) == []
    finally:
        stop(parent)
        kill_all(workers)


def test_only_a_process_of_one_thread_may_fork() -> None:
    alone = subprocess.run([sys.executable, "-c", "from nl2sql_assets.forking import fork_is_safe; "
                            "print(fork_is_safe())"], capture_output=True, text=True, timeout=60, check=True)
    assert alone.stdout.strip() == "True"
    native = subprocess.run([sys.executable, "-c", "import numpy; from nl2sql_assets.forking import fork_is_safe; "
                             "print(fork_is_safe())"], capture_output=True, text=True, timeout=60, check=True,
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert native.stdout.strip() == "False"  # BLAS's own pool is a thread Python does not list
    release = threading.Event()
    helper = threading.Thread(target=release.wait, daemon=True)
    helper.start()
    try:
        assert fork_is_safe() is False
    finally:
        release.set()
        helper.join()
