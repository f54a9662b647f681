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

Nothing here can touch a real database: the copy is in memory, SQLite's authorizer admits only
reads and DuckDB has external access switched off. A clone is kept per (dialect, fingerprint)
and used under a lock, so threads share it safely.
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


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _SqliteClone:
    def __init__(self, snapshot: SchemaSnapshot) -> None:
        import sqlite3

        self._sqlite3 = sqlite3
        self._lock = threading.Lock()
        self._reads: list[tuple[str, str]] = []
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        for table in snapshot.tables:
            if "." in table.name or not table.columns or table.name.lower().startswith("sqlite_"):
                continue
            key = table.primary_key
            pk = f", PRIMARY KEY ({', '.join(_quote(k) for k in key)})" if key else ""
            for typed in (True, False):  # the declared types (an INTEGER key is the rowid), else none
                columns = ", ".join(f"{_quote(c.name)} {c.type if typed else ''}".rstrip() for c in table.columns)
                try:
                    self._conn.execute(f"CREATE TABLE {_quote(table.name)} ({columns}{pk})")
                    break
                except sqlite3.Error:
                    continue
        self._conn.set_authorizer(self._authorize)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, _db: str | None,
                   _trigger: str | None) -> int:
        sqlite3 = self._sqlite3
        if action == sqlite3.SQLITE_READ:
            self._reads.append((arg1 or "", arg2 or ""))
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA:  # pragma_* table functions: compiled, never run
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    def prepare(self, sql: str) -> Prepared:
        with self._lock:
            self._reads = []
            try:
                self._conn.execute("EXPLAIN " + sql).close()
            except (self._sqlite3.Error, self._sqlite3.Warning, ValueError) as exc:
                message = str(exc) or type(exc).__name__
                # The copy's authorizer, or a function the real connection may have (an
                # extension, a build's own): the database that runs it decides those.
                if message.startswith(("not authorized", "no such function")):
                    return Prepared()
                return Prepared(error=message)
            return Prepared(reads=frozenset(self._reads))


class _DuckdbClone:
    def __init__(self, snapshot: SchemaSnapshot) -> None:
        import duckdb

        self._duckdb = duckdb
        self._lock = threading.Lock()
        self._conn = duckdb.connect(":memory:", config={"enable_external_access": False, "threads": 1})
        for table in snapshot.tables:
            if "." in table.name or not table.columns:
                continue
            for typed in (True, False):  # the snapshot's types, else VARCHAR where one does not parse
                columns = ", ".join(f"{_quote(c.name)} {(c.type if typed and c.type else 'VARCHAR')}"
                                    for c in table.columns)
                try:
                    self._conn.execute(f"CREATE TABLE {_quote(table.name)} ({columns})")
                    break
                except duckdb.Error:
                    continue
        self._conn.execute("SET lock_configuration = true")

    def prepare(self, sql: str) -> Prepared:
        with self._lock:
            try:
                self._conn.execute("EXPLAIN " + sql).fetchall()
            except self._duckdb.Error as exc:
                message = _first_line(str(exc))
                # Only errors of names and syntax are the SQL's: a type error may come from the
                # copy's column types, which the real database decides when the statement runs.
                if any(marker in message for marker in _DUCKDB_NAME_ERRORS):
                    return Prepared(error=message)
            return Prepared()


_DUCKDB_NAME_ERRORS = ("Parser Error", "Table with name", "Referenced column", "Referenced table",
                       "Ambiguous reference", "not found in FROM clause", "does not have a column")


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[:2])[:300] if lines else "the statement could not be prepared"


_CLONES = {"sqlite": _SqliteClone, "duckdb": _DuckdbClone}
_lock = threading.Lock()
_kept: OrderedDict[tuple[str, str], Any] = OrderedDict()


def prepare(sql: str, dialect: str, snapshot: SchemaSnapshot, fingerprint: str) -> Prepared | None:
    """The engine's own verdict on ``sql`` against ``snapshot`` (None for a dialect with no clone)."""
    factory = _CLONES.get(dialect)
    if factory is None:
        return None
    key = (dialect, fingerprint)
    with _lock:
        clone = _kept.get(key)
        if clone is not None:
            _kept.move_to_end(key)
    if clone is None:
        clone = factory(snapshot)
        with _lock:
            clone = _kept.setdefault(key, clone)
            while len(_kept) > _KEEP:
                _kept.popitem(last=False)
    return clone.prepare(sql)
