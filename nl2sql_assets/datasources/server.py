"""What the server engines (Postgres, MySQL/MariaDB) share: where the server is, without its
password in sight; a pool of connections per adapter; and the client's own cancel of a statement
that outlives its timeout.

A server datasource's URL comes from the environment (``url_env``) or from nl2sql.yaml without a
password (``url``); the password from the URL or from ``password_env``. The password is
registered with ``redact`` the moment it is read, so no report, record, log line or message
carries it, and ``ServerAddress`` never prints it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from nl2sql_assets.config import ConfigError, DatasourceConfig
from nl2sql_assets.datasources.base import DatasourceUnavailable
from nl2sql_assets.redact import register_secret

C = TypeVar("C")


@dataclass(frozen=True)
class ServerAddress:
    """A server datasource's host, port, user and database, and (never shown) its password."""

    scheme: str
    host: str
    port: int
    user: str | None
    database: str | None
    params: dict[str, str] = field(default_factory=dict)
    password: str | None = field(default=None, repr=False)

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        return f"{self.scheme}://{user}{self.host}:{self.port}/{self.database or ''}"

    @classmethod
    def of(cls, cfg: DatasourceConfig, schemes: tuple[str, ...], default_port: int,
           environ: Mapping[str, str] | None = None) -> ServerAddress:
        """The address of ``cfg`` (its URL from ``url`` or the variable ``url_env`` names, its
        password from the URL or ``password_env``); a ConfigError naming the datasource, the
        variable and the fix when one is missing or the URL is not of ``schemes``."""
        env = os.environ if environ is None else environ
        if cfg.url_env is not None:
            url = env.get(cfg.url_env)
            if not url:
                raise ConfigError(f"datasource {cfg.id!r}: the environment variable {cfg.url_env} (url_env) is not "
                                  f"set: export {cfg.url_env}={schemes[0]}://USER@HOST:PORT/DATABASE")
        elif cfg.url is not None:
            url = cfg.url
        else:
            raise ConfigError(f"datasource {cfg.id!r}: no URL: set url_env (or url, without a password)")
        try:
            parts = urlsplit(url)
            port = parts.port
            password = unquote(parts.password) if parts.password is not None else None
        except ValueError as exc:
            raise ConfigError(f"datasource {cfg.id!r}: the URL cannot be read ({exc}); the shape is "
                              f"{schemes[0]}://USER@HOST:PORT/DATABASE") from None
        register_secret(password)
        if parts.scheme not in schemes:
            raise ConfigError(f"datasource {cfg.id!r}: a {cfg.engine} URL starts {' or '.join(s + '://' for s in schemes)}"
                              f", not {parts.scheme or '(nothing)'}://")
        if cfg.password_env is not None:
            password = env.get(cfg.password_env)
            if password is None:
                raise ConfigError(f"datasource {cfg.id!r}: the environment variable {cfg.password_env} "
                                  "(password_env) is not set")
            register_secret(password)
        database = unquote(parts.path.lstrip("/")) or None
        return cls(scheme=parts.scheme, host=parts.hostname or "localhost", port=port or default_port,
                   user=unquote(parts.username) if parts.username else None, database=database,
                   params=dict(parse_qsl(parts.query)), password=password)

    def where(self, label: str, datasource: str, database: str | None = None) -> str:
        """``datasource 'x' (Postgres at host:port, database d, user u)``: what every message names."""
        user = f", user {self.user}" if self.user else ""
        return (f"datasource {datasource!r} ({label} at {self.host}:{self.port}, database "
                f"{database or self.database}{user})")


class ConnectionPool(Generic[C]):
    """At most ``size`` connections, made on demand by ``connect`` and handed to one statement at a
    time. A connection that broke is closed, not returned; a waiting statement gets the next one
    free. ``close`` closes every idle connection, and each busy one when it comes back."""

    def __init__(self, connect: Callable[[], C], close: Callable[[C], None], size: int,
                 wait_s: float = 30.0) -> None:
        self._connect = connect
        self._close = close
        self._size = size
        self._wait_s = wait_s
        self._idle: list[C] = []
        self._made = 0
        self._closed = False
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def connection(self) -> Iterator[PooledConnection[C]]:
        """A connection for one statement; it goes back to the pool unless marked ``broken``."""
        conn = self._acquire()
        held = PooledConnection(conn)
        try:
            yield held
        finally:
            self._release(conn, held.broken)

    def _acquire(self) -> C:
        deadline = time.monotonic() + self._wait_s
        with self._cond:
            while True:
                if self._idle:
                    return self._idle.pop()
                if self._made < self._size:
                    self._made += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DatasourceUnavailable(f"no connection of the pool ({self._size}) came free in "
                                                f"{self._wait_s:g} s")
                self._cond.wait(left)
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._made -= 1
                self._cond.notify()
            raise

    def _release(self, conn: C, broken: bool) -> None:
        with self._cond:
            keep = not broken and not self._closed
            if keep:
                self._idle.append(conn)
            else:
                self._made -= 1
            self._cond.notify()
        if not keep:
            with contextlib.suppress(Exception):
                self._close(conn)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._made -= len(idle)
        for conn in idle:
            with contextlib.suppress(Exception):
                self._close(conn)

    def reopen(self) -> None:
        """Take connections again after ``close`` (an adapter closed between runs and used anew)."""
        with self._cond:
            self._closed = False


@dataclass
class PooledConnection(Generic[C]):
    """A connection lent for one statement; set ``broken`` when it must not be used again."""

    conn: C
    broken: bool = False


class Watchdog:
    """Calls ``cancel`` once ``after_s`` seconds have passed, unless stopped first: the client's
    own interrupt of a statement the server did not stop at its own limit."""

    def __init__(self, cancel: Callable[[], Any], after_s: float) -> None:
        self.fired = threading.Event()
        self._cancel = cancel
        self._timer = threading.Timer(after_s, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired.set()
        with contextlib.suppress(Exception):
            self._cancel()

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


#: seconds past the server's own statement timeout after which the client cancels
CLIENT_GRACE_S = 0.5
