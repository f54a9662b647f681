"""One Postgres transaction at a time for the cluster profile's tables (ledger, shards, warehouse
copy): a fresh connection, committed on success, rolled back on error, always closed. psycopg2 is
imported here, only when the cluster profile uses Postgres."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def pg_transaction(dsn: str) -> Iterator[Any]:
    """A cursor inside one transaction on a new connection (10 s connect timeout)."""
    import psycopg2

    con = psycopg2.connect(dsn, connect_timeout=10)
    try:
        with con, con.cursor() as cur:
            yield cur
    finally:
        con.close()
