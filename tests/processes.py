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
