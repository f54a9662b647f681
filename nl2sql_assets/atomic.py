"""Atomic file writes: a reader, or a crash, sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any


def _write_all(fh: Any, data: bytes) -> None:
    fh.write(data)


def atomic_write(path: str | Path, data: bytes | str) -> Path:
    """Replace ``path`` with ``data`` so that a reader (or a crash) sees the old file or the
    new one, never half of either: a temporary file beside it, fsync, then ``os.replace``."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_all(fh, data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    try:  # make the rename itself durable where the platform allows it
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return path
