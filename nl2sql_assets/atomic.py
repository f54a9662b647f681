"""Durable file writes, the one mechanism every stored file goes through.

Data is written to a temporary file in the destination's own folder, flushed and fsynced,
then put in place in one step: ``atomic_write`` replaces the file (``os.replace``: a reader,
or a crash, sees the old file or the new one, never half of either), ``write_new`` links it
(``os.link``: the file is created exactly once and never overwritten). On any error the
temporary file is removed and nothing partial remains; the error names the file and the cause.

Temporary files are recognisable (``.nl2sql-tmp-<pid>-<host>-<random>-<name>.tmp``): one left
behind by a killed process is removed by the next write into its folder (its writer's
process is gone), or by ``remove_stale_temps``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from nl2sql_assets.errors import UserError

TEMP_PREFIX = ".nl2sql-tmp-"
STALE_AFTER_S = 24 * 3600  # a temp file this old is stale whoever wrote it
_HOST = hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]
_TEMP = re.compile(rf"^{re.escape(TEMP_PREFIX)}(\d+)-([0-9a-f]{{8}})-[0-9a-f]{{8}}-.*\.tmp$")


class WriteFailed(UserError, OSError):
    """A file could not be written; the message names it and says why. Nothing partial remains."""


def _cause(exc: OSError) -> str:
    cause = exc.strerror or str(exc) or type(exc).__name__
    return f"[Errno {exc.errno}] {cause}" if exc.errno else cause


def _failed(path: Path, exc: OSError, what: str = "cannot write") -> WriteFailed:
    return WriteFailed(f"{path}: {what}: {_cause(exc)}; nothing was written")


def _write_all(fh: BinaryIO, data: bytes | Iterable[bytes]) -> None:
    if isinstance(data, bytes):
        fh.write(data)
        return
    for chunk in data:
        fh.write(chunk)


def _temp_name(path: Path) -> Path:
    return path.parent / f"{TEMP_PREFIX}{os.getpid()}-{_HOST}-{secrets.token_hex(4)}-{path.name[:80]}.tmp"


def _write_temp(path: Path, data: bytes | Iterable[bytes], mode: int) -> Path:
    """``data`` in a new temporary file beside ``path``, on disk (fsynced). Removed on any error."""
    tmp = _temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_all(fh, data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _sync_dir(directory: Path) -> None:
    """Make a rename or link itself durable, where the platform allows it."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _prepare(path: str | Path, data: bytes | str) -> tuple[Path, bytes]:
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _failed(path, exc, "cannot create its folder") from exc
    remove_stale_temps(path.parent)
    return path, data


def atomic_write(path: str | Path, data: bytes | str) -> Path:
    """Replace ``path`` with ``data``: readers and crashes see the old file or the new one.
    Raises WriteFailed (the old file untouched, no temporary file left)."""
    path, data = _prepare(path, data)
    return _replace(path, data)


def atomic_write_chunks(path: str | Path, chunks: Iterable[bytes]) -> Path:
    """``atomic_write`` of data given in pieces, written as they come: a file far bigger than
    what the writer holds at once (a run's records, copied line by line) replaces ``path``
    exactly as ``atomic_write`` does."""
    path, _ = _prepare(path, b"")
    return _replace(path, chunks)


def _replace(path: Path, data: bytes | Iterable[bytes]) -> Path:
    """Write ``data`` beside ``path`` (keeping its permissions), then rename it over ``path``."""
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o644
    try:
        tmp = _write_temp(path, data, mode)
    except OSError as exc:
        raise _failed(path, exc) from exc
    try:
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise _failed(path, exc) from exc
    _sync_dir(path.parent)
    return path


def write_new(path: str | Path, data: bytes | str) -> Path:
    """Create ``path`` holding ``data``, complete or not at all, never overwriting a file.
    Raises FileExistsError when the name is taken (nothing written), WriteFailed otherwise."""
    path, data = _prepare(path, data)
    if path.exists():
        raise FileExistsError(f"{path}: already exists")
    try:
        tmp = _write_temp(path, data, 0o644)
    except OSError as exc:
        raise _failed(path, exc) from exc
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        raise _failed(path, exc) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _sync_dir(path.parent)
    return path


def check_writable(path: str | Path) -> Path:
    """Fail now, naming ``path``, if a file could not be written there later (its folder is
    created when missing). Leaves nothing behind."""
    path = Path(path)
    if path.is_dir():
        raise WriteFailed(f"{path}: is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.unlink(_write_temp(path, b"", 0o600))
    except OSError as exc:
        raise WriteFailed(f"{path}: cannot be written: {_cause(exc)}") from exc
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    except OSError:
        return True
    return True


def remove_stale_temps(folder: str | Path) -> list[Path]:
    """Remove the temporary files in ``folder`` whose writer is gone: written on this host by a
    process that no longer runs, or older than a day. Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        match = _TEMP.match(entry.name)
        if match is None:
            continue
        pid, host = int(match.group(1)), match.group(2)
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        mine = host == _HOST
        if (mine and pid != os.getpid() and not _alive(pid)) or age > STALE_AFTER_S:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed
