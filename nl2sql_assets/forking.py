"""Worker processes: when a process may be forked, and workers that never outlive their parent.

Why: a fork copies only the thread that calls it, so a process running another thread (one of
Python's, or a native pool: a database's, BLAS's, ONNX's) may hand its child a lock held for ever;
``fork_is_safe`` says when there is none. And a worker whose parent is killed (SIGTERM without a
handler, SIGKILL, the OOM killer) used to live on as an orphan, waiting for ever on a queue that the
parent fed, since it holds a copy of that queue's ends itself: ``exit_with_parent`` ends it as soon
as its parent is gone, and every process pool of the product starts its workers with it
(``process_pool``).

A leaf module: it imports nothing of the project.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

#: The exit status of a worker whose parent went away.
EXIT_PARENT_GONE = 1


def fork_is_safe() -> bool:
    """Whether this process may be forked: Linux, and this process is one thread, native ones
    counted (``/proc/self/task``)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def exit_with_parent() -> None:
    """In a worker process (``multiprocessing``, forked or spawned): end this process as soon as
    the process that started it has gone, however it ended. A daemon thread waits on the parent's
    sentinel; nothing happens in a process that no ``multiprocessing`` parent started."""
    import multiprocessing
    import multiprocessing.connection

    parent = multiprocessing.parent_process()
    sentinel = getattr(parent, "sentinel", None)
    if parent is None or sentinel is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([sentinel])
        os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _start_worker(initializer: Callable[..., Any] | None, initargs: Sequence[Any]) -> None:
    exit_with_parent()
    if initializer is not None:
        initializer(*initargs)


def process_pool(max_workers: int, *, initializer: Callable[..., Any] | None = None, initargs: Sequence[Any] = (),
                 context: Any = None) -> ProcessPoolExecutor:
    """A ProcessPoolExecutor whose workers end with their parent (``exit_with_parent``), then run
    ``initializer(*initargs)``; ``context`` is a multiprocessing context (None: the default)."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=max_workers, mp_context=context, initializer=_start_worker,
                               initargs=(initializer, tuple(initargs)))
