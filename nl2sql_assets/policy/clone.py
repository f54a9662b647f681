"""The database's own verdict on a statement: prepared, never run, on an empty copy of the schema.

SQLite and DuckDB are the authority on which names a statement's text resolves to: SQLite's
double-quoted strings, its ``rowid``, ``USING`` and natural joins, correlated names, the
precedence of select aliases. ``prepare`` asks the engine itself, on an in-memory database that
holds the snapshot's tables and no rows, with ``EXPLAIN`` (which compiles and never executes):

* when the engine cannot prepare the statement, its own message (``no such column: x``,
  ``ambiguous column name: a``, a Binder Error naming the column) says what is wrong with the
  SQL, so a bad name is reported as the engine's mistake, with the name;
* SQLite's authorizer reports every table and column the compiled statement reads. The policy
  facts must cover them all; a read the analysis did not find fails closed
  (``policy/facts.py``).

Each engine makes its own copy (``DatabaseEngine.schema_copy``: ``datasources/sqlite.py``,
``datasources/duckdb_adapter.py``); a server's word comes from the live database instead
(``statement_reads``, ``policy/facts.py``). Nothing here can touch a real database: the copy is in
memory, SQLite's authorizer admits only reads and DuckDB has external access switched off. A copy
is kept per (dialect, fingerprint) and used under a lock, so threads share it safely.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Any

from nl2sql_assets.datasources.schema import SchemaSnapshot

#: how many schema copies a process keeps (one per datasource and dialect in practice)
_KEEP = 16


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What the engine said of one statement: ``error`` (its message) when it could not prepare
    it; ``reads`` the (table, column) pairs SQLite's authorizer saw, ``""`` as the column for a
    table read without a column, ``ROWID`` for a rowid; None where the engine reports no reads."""

    error: str | None = None
    reads: frozenset[tuple[str, str]] | None = None


_lock = threading.Lock()
_kept: OrderedDict[tuple[str, str], Any] = OrderedDict()


def prepare(sql: str, dialect: str, snapshot: SchemaSnapshot, fingerprint: str) -> Prepared | None:
    """The engine's own verdict on ``sql`` against ``snapshot`` (None for a dialect whose engine
    makes no in-memory copy: a server's word comes from the live database)."""
    from nl2sql_assets.datasources.engines import engine_for_dialect

    key = (dialect, fingerprint)
    with _lock:
        clone = _kept.get(key)
        if clone is not None:
            _kept.move_to_end(key)
    if clone is None:
        engine = engine_for_dialect(dialect)
        made = engine.schema_copy(snapshot) if engine is not None else None
        if made is None:
            return None
        with _lock:
            clone = _kept.setdefault(key, made)
            while len(_kept) > _KEEP:
                _kept.popitem(last=False)
    error, reads = clone.prepare(sql)
    return Prepared(error=error, reads=reads)
