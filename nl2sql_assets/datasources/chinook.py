"""Chinook, the demo's music-store database: found locally or fetched once, always checked by SHA-256.

The suite's gold rows are only right for one exact file, so every source (a given path, the
``NL2SQL_CHINOOK`` variable, the user cache, a download) must match the pinned hash.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from nl2sql_assets.datasources.base import DatasourceError
from nl2sql_assets.errors import UserError

CHINOOK_URL = (
    "https://github.com/lerocha/chinook-database/raw/6e21bb360ba60da6e5c86e8f4deee784736fd650"
    "/ChinookDatabase/DataSources/Chinook_Sqlite.sqlite"
)
CHINOOK_SHA256 = "bdf635be69850bd3be09c9a2dbeef7ddfb80036bd3ef3381383cd03b61e4a61a"
# A short wait: without network the first run should say so in seconds, not minutes. It bounds
# connecting and each read, not the whole (1 MB) download.
DOWNLOAD_TIMEOUT_S = 15.0


class ChinookError(UserError, DatasourceError):
    """No usable Chinook file: missing, the wrong file, or the download failed."""


class ChinookNotFound(ChinookError):
    """No Chinook anywhere: no path given, none cached, and the download failed. Whoever prints it
    adds how to give one to the command at hand (``--chinook``, ``NL2SQL_CHINOOK``)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$NL2SQL_CACHE_DIR``, else ``$XDG_CACHE_HOME/nl2sql-assets``, else ``~/.cache/nl2sql-assets``."""
    env = os.environ if environ is None else environ
    if env.get("NL2SQL_CACHE_DIR"):
        return Path(env["NL2SQL_CACHE_DIR"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "nl2sql-assets"


def cached_path(directory: Path) -> Path:
    return directory / f"chinook-{CHINOOK_SHA256[:8]}.sqlite"


def verify_chinook(path: Path, *, what: str, remedy: str = "") -> Path:
    """``path`` if it is the pinned Chinook file; else a ChinookError with both hashes."""
    if not path.is_file():
        raise ChinookError(f"{what}: Chinook file not found: {path}")
    actual = sha256_file(path)
    if actual != CHINOOK_SHA256:
        hint = f" {remedy}" if remedy else ""
        raise ChinookError(
            f"{what}: {path} is not the expected Chinook database "
            f"(SHA-256 expected {CHINOOK_SHA256}, got {actual}).{hint}"
        )
    return path


def download_chinook(url: str, target: Path, *, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Fetch ``url`` into ``target`` atomically: a temp file in the same folder, checked, then renamed.
    A download that cannot be made raises ChinookNotFound; a wrong file, ChinookError."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout_s) as response:
                    shutil.copyfileobj(response, out, 1 << 20)
            except OSError as exc:  # URLError, HTTPError and socket timeouts are all OSErrors
                raise ChinookNotFound(f"Chinook could not be downloaded from {url} ({_reason(exc)})") from None
        actual = sha256_file(tmp)
        if actual != CHINOOK_SHA256:
            raise ChinookError(
                f"the file downloaded from {url} is not the expected Chinook database "
                f"(SHA-256 expected {CHINOOK_SHA256}, got {actual}); nothing was kept."
            )
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def _reason(exc: OSError) -> str:
    """The short cause of a failed download: ``Name or service not known``, ``timed out``, ``404``."""
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
    if isinstance(reason, OSError) and reason.strerror:
        reason = reason.strerror
    code = getattr(exc, "code", None)
    return f"HTTP {code} {reason}" if code else str(reason)


def resolve_chinook(
    explicit: Path | None = None,
    *,
    cache_dir: Path | None = None,
    url: str | None = None,
    environ: Mapping[str, str] | None = None,
    on_download: Callable[[str], None] | None = None,
) -> Path:
    """The Chinook file to use: ``explicit`` (``--chinook``), else ``$NL2SQL_CHINOOK``, else the
    user cache, else a download into the cache (``on_download(url)`` is told first, so a caller
    can say why it waits). Whatever the source, its SHA-256 must match."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        return verify_chinook(Path(explicit).expanduser(), what="--chinook")
    if env.get("NL2SQL_CHINOOK"):
        return verify_chinook(Path(env["NL2SQL_CHINOOK"]).expanduser(), what="NL2SQL_CHINOOK")
    directory = cache_dir if cache_dir is not None else default_cache_dir(env)
    cached = cached_path(Path(directory))
    if cached.exists():
        return verify_chinook(
            cached, what="cached Chinook", remedy="Delete it and run again to download a fresh copy."
        )
    url = url or CHINOOK_URL
    if on_download is not None:
        on_download(url)
    try:
        return download_chinook(url, cached)
    except ChinookNotFound as exc:
        raise ChinookNotFound(f"no Chinook database: NL2SQL_CHINOOK is not set, none is cached at {cached}, "
                              f"and {exc}") from None
