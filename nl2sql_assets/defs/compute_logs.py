"""Dagster's local compute logs with the captured output mirrored to the terminal by a thread of
the run's own process, instead of a ``tail -F`` and a watcher process per stream and run.
Selected in ``scripts/dagster.yaml`` (``compute_logs``)."""

import os
import sys
import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from dagster import Field, StringSource
from dagster._config.config_schema import UserConfigSchema
from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
from dagster._serdes import ConfigurableClassData
from dagster._utils import ensure_file, touch_file

# How often the mirror looks for new output (``tail -F``, which Dagster's own runs, polls once a second).
MIRROR_POLL_S = 0.1


class MirroredComputeLogManager(LocalComputeLogManager):
    """Dagster's local compute logs (the same files under ``$DAGSTER_HOME/storage``, which the UI
    shows), with the output mirrored to the terminal by a thread of the run's own process.

    Why: Dagster's manager mirrors each captured stream through a ``tail -F`` process and a
    Python watcher process that kills the ``tail`` if the run's process dies: four processes
    started and stopped for each run, and two Python interpreters starting beside the run. A
    thread has no process to orphan. What is captured, where it is stored and what reaches the
    terminal are as before; output reaches the terminal within ``MIRROR_POLL_S``.

    Selected in ``dagster.yaml``::

        compute_logs:
          module: nl2sql_assets.defs.compute_logs
          class: MirroredComputeLogManager
          config: {}          # base_dir: $DAGSTER_HOME/storage unless given
    """

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return {
            "base_dir": Field(StringSource, is_required=False),
            "polling_timeout": Field(float, is_required=False),
        }

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> "MirroredComputeLogManager":
        config = dict(config_value or {})
        if not config.get("base_dir"):  # Dagster's own default: $DAGSTER_HOME/storage
            config["base_dir"] = os.path.join(os.environ["DAGSTER_HOME"], "storage")
        return cls(inst_data=inst_data, **config)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Generator[CapturedLogContext, None, None]:
        outpath = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        errpath = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        with _mirrored(sys.stdout, outpath), _mirrored(sys.stderr, errpath):
            yield CapturedLogContext(log_key)
        # Left on disk, as Dagster's manager does, so a reader knows the capture is complete.
        touch_file(self.complete_artifact_path(log_key))


def _fileno(stream: IO) -> int | None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # pytest's captured streams, a closed stream
        return None
    return fd if isinstance(fd, int) else None


@contextmanager
def _mirrored(stream: IO, path: str) -> Iterator[None]:
    """``stream``'s file descriptor redirected into ``path`` for the block (Dagster's own
    ``redirect_to_file``), and what lands there copied to where the descriptor pointed before."""
    ensure_file(path)
    fd = _fileno(stream)
    if fd is None:  # nothing to redirect or mirror (Dagster's manager does the same)
        with redirect_to_file(stream, path):
            yield
        return
    terminal = os.dup(fd)
    done = threading.Event()
    mirror = threading.Thread(target=_follow, args=(path, terminal, done), name="compute-log-mirror", daemon=True)
    mirror.start()
    try:
        with redirect_to_file(stream, path):
            yield
    finally:
        done.set()  # after redirect_to_file flushed the stream and restored the descriptor
        mirror.join()
        os.close(terminal)


def _follow(path: str, terminal: int, done: threading.Event) -> None:
    """Copy ``path`` to ``terminal`` from its start as it grows, until ``done`` and all is copied."""
    with open(path, "rb") as fh:
        while True:
            finished = done.is_set()  # read before the last pass: nothing is written after it is set
            chunk = fh.read(1 << 16)
            while chunk:
                try:
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(terminal, view):]
                except OSError:  # the terminal went away: keep capturing into the file
                    pass
                chunk = fh.read(1 << 16)
            if finished:
                return
            done.wait(MIRROR_POLL_S)
