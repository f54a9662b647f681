"""Signals: the product leaves a caller's signal dispositions as it found them, and every process it
starts begins with the stopping signals at their defaults.

Why: Dagster maps SIGTERM to SIGINT's handler when it runs in-process and does not put SIGTERM
back, so in a process started with SIGINT ignored (``command &`` from a script, ``nohup``, many
process managers) SIGTERM ends up ignored too, and an ignored signal is inherited by every process
started afterwards: servers that never exit on SIGTERM. ``dispositions_kept`` wraps such work;
``defaults`` is what a started process runs first (``preexec_fn``, or a command's own start).

A leaf module: it imports nothing of the project.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: the signals that ask a process to stop
STOPPING: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def dispositions_kept() -> Iterator[None]:
    """Whatever the body does to the stopping signals' handlers is undone when it ends (in the
    main thread, the only one that may set them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[signal.Signals, Any] = {s: signal.getsignal(s) for s in STOPPING}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def defaults() -> None:
    """The stopping signals at their defaults: Ctrl-C raises KeyboardInterrupt, SIGTERM and SIGHUP
    end the process, whatever the parent ignored."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def child_defaults() -> None:
    """``preexec_fn`` of a process the product starts: the stopping signals at the system defaults."""
    for sig in STOPPING:
        signal.signal(sig, signal.SIG_DFL)
