"""One Postgres transaction at a time for the cluster profile's tables (ledger, shards, warehouse
copy): a fresh connection, committed on success, rolled back on error, always closed. psycopg2 is
imported here, only when the cluster profile uses Postgres.

Nothing here waits forever: the connection has a connect timeout and TCP keepalives (a server
that vanished is noticed), each statement and each lock wait has a timeout, and a lost or
refused connection is raised as ``PostgresUnavailable``, whose message names Postgres, the
server and what to do (a restarted server: re-execute the run from failure).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

CONNECT_TIMEOUT_S = 10
#: A statement (a shard's or a partition's records included) runs well under this; a longer one
#: is a server in trouble, and a step that fails can be re-executed.
STATEMENT_TIMEOUT_MS = 120_000
LOCK_TIMEOUT_MS = 60_000  # the ledger's row lock is held for one short transaction at a time
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}


class PostgresUnavailable(RuntimeError):
    """The cluster profile's Postgres could not be reached, or dropped the connection mid-transaction."""


def _where(dsn: str) -> str:
    """host:port/dbname of a DSN, for messages (no password)."""
    from psycopg2.extensions import parse_dsn

    try:
        parts = parse_dsn(dsn)
    except Exception:  # a malformed DSN: psycopg2's own error says why
        return "(unparsed DSN)"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', '5432')}/{parts.get('dbname', '?')}"


def _unavailable(dsn: str, exc: Exception) -> PostgresUnavailable:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return PostgresUnavailable(
        f"PostgreSQL at {_where(dsn)} (NL2SQL_PG_DSN) is unavailable: {first}. If the server restarted, "
        "re-execute the run from failure: finished shards are kept and nothing is counted twice.")


@contextlib.contextmanager
def pg_transaction(dsn: str) -> Iterator[Any]:
    """A cursor inside one transaction on a new connection (see the module for the timeouts)."""
    import psycopg2
    import psycopg2.errors

    try:
        con = psycopg2.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, **KEEPALIVES,
                               options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS} "
                                       f"-c lock_timeout={LOCK_TIMEOUT_MS}")
    except psycopg2.OperationalError as exc:
        raise _unavailable(dsn, exc) from exc
    try:
        with con, con.cursor() as cur:
            yield cur
    except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
        if not con.closed and not isinstance(exc, psycopg2.errors.QueryCanceled):
            raise
        raise _unavailable(dsn, exc) from exc
    finally:
        con.close()


@contextlib.contextmanager
def pg_tables(dsn: str, owner: str, schema: str) -> Iterator[Any]:
    """A transaction in which a store creates its tables: ``schema`` exists, and no other process
    creates ``owner``'s tables meanwhile (steps starting together would race on ``CREATE ... IF
    NOT EXISTS``; a transaction-scoped advisory lock named by ``owner`` lets one through at a time)."""
    with pg_transaction(dsn) as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [owner])
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        yield cur
