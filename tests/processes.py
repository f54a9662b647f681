"""Processes a test starts: begun with the stopping signals at their defaults (whatever the test
process inherited or an in-process Dagster run left), and stopped for sure: SIGTERM, then SIGKILL
after a bounded wait, so no test leaves a process behind."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Sequence
from typing import Any

from nl2sql_assets.signals import child_defaults


def start(args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    return subprocess.Popen(list(args), preexec_fn=child_defaults, **kwargs)


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> int:
    """SIGTERM, then SIGKILL if it has not ended within ``grace_s``; its exit status."""
    if process.poll() is None:
        process.terminate()
        try:
            return process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        return process.wait(timeout=grace_s)
    return process.returncode if process.returncode is not None else -9


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process, read from /proc (a zombie has ended: only its parent has yet
    to read its status); for processes a test did not start itself, such as another's workers."""
    from pathlib import Path

    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that are still its children (from /proc)."""
    from pathlib import Path

    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def still_alive(pids: Sequence[int], within_s: float = 20.0) -> list[int]:
    """Those of ``pids`` still alive once they have all ended or ``within_s`` has passed."""
    import time

    deadline = time.monotonic() + within_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def kill_all(pids: Sequence[int]) -> None:
    """SIGKILL to each of ``pids`` still alive: a test leaves none behind, whatever it asserted."""
    import os
    import signal

    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
