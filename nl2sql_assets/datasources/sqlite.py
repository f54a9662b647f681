"""The SQLite adapter: stdlib sqlite3, the file opened read-only by URI, one connection per call.

Opening costs about 0.35 ms, so a connection per call is cheap and makes the adapter safe to
share between threads. A bulk reader (the prediction grader's worker processes) passes
``keep_open=True`` instead: one connection per thread, opened once, whose cost is then saved
on every statement. An authorizer that admits only reads, and only reviewed functions, backs
up the statement guard.

``bulk=True`` (the grader, running thousands of predicted statements) keeps the connection
open and leaves the statement to SQLite's own checks, which are the deepest layer anyway: the
first keyword must start a read (as in the guard), the file is opened read-only, the authorizer
sees every action SQLite takes (reads and reviewed functions only: no write, ATTACH, PRAGMA
write or extension), and sqlite3 refuses a second statement before running the first. The
sqlglot parse it skips costs about twice the query itself on typical benchmark SQL.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.datasources.base import (
    DatasourceError,
    QueryFailed,
    QueryOutput,
    QueryTimeout,
    ReadOnlyViolation,
)
from nl2sql_assets.datasources.engines import DatabaseEngine, SqlStyle
from nl2sql_assets.datasources.guard import READ_STARTS, check_read_only
from nl2sql_assets.datasources.schema import ColumnInfo, ForeignKey, SchemaSnapshot, TableInfo

# How many SQLite VM instructions run between deadline checks (a check costs well under a microsecond).
_PROGRESS_STEPS = 2000

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
# Pragmas that only read; SQLite exposes them as table-valued functions (pragma_table_info(...)).
_READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "foreign_key_list", "index_list", "index_info", "index_xinfo"}
)


# The functions a query may call (SQLite reports each call as SQLITE_FUNCTION with its name):
# what the suites, the SQL generator and ordinary analytics need. Everything else is refused,
# notably load_extension, readfile/writefile/edit (CLI builds), fts3_tokenizer (leaks pointers),
# randomblob/zeroblob (memory), sqlite_* (build details) and json table functions.
ALLOWED_FUNCTIONS = frozenset({
    # aggregates
    "count", "sum", "total", "avg", "min", "max", "group_concat", "string_agg",
    # windows
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value",
    # operators SQLite runs as functions, and null handling
    "like", "glob", "coalesce", "ifnull", "iif", "nullif", "typeof",
    # strings
    "length", "octet_length", "lower", "upper", "substr", "substring", "trim", "ltrim", "rtrim", "replace",
    "instr", "printf", "format", "concat", "concat_ws", "char", "unicode", "hex", "quote",
    # numbers
    "abs", "round", "sign", "ceil", "ceiling", "floor", "trunc", "sqrt", "power", "pow", "exp", "ln", "log",
    "log2", "log10", "mod", "pi",
    # dates
    "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff",
})  # fmt: skip


# Leading blanks, comments and opening parentheses before a statement's first keyword.
_LEAD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")


def check_first_keyword(sql: str) -> str:
    """The bulk reader's statement check: a read's first keyword, else ReadOnlyViolation (the
    rest is SQLite's: read-only file, authorizer, one statement). Returns the SQL to run."""
    start = _LEAD.match(sql)
    word = _WORD.match(sql, start.end() if start else 0)
    if word is None:
        if not sql.strip():
            raise QueryFailed("the SQL is empty")
        raise ReadOnlyViolation("this statement refused: only a single read query (SELECT, WITH ... SELECT, "
                                "UNION ...) may run")
    if word.group(0).upper() not in READ_STARTS:
        raise ReadOnlyViolation(f"{word.group(0).upper()} statement refused: only a single read query "
                                "(SELECT, WITH ... SELECT, UNION ...) may run")
    return sql.rstrip().rstrip(";").rstrip()


def _authorizer(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_OK if (arg2 or "").lower() in ALLOWED_FUNCTIONS else sqlite3.SQLITE_DENY
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and arg1 is not None and arg1.lower() in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _reverse_every_table(conn: sqlite3.Connection) -> None:
    """Shadow each table with a TEMP view of its rows in the other order (the temp schema is
    searched first, and a view with a LIMIT keeps its ORDER BY), so every scan, and every tie
    under an ORDER BY, meets the rows backwards. The file itself stays untouched."""
    conn.execute("PRAGMA reverse_unordered_selects = ON")
    tables = [name for (name,) in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    for name in tables:
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            conn.execute(f"CREATE TEMP VIEW {quoted} AS SELECT * FROM main.{quoted} ORDER BY rowid DESC LIMIT -1")
        except sqlite3.OperationalError:
            continue  # a WITHOUT ROWID table: read as it is


class SqliteAdapter:
    """Read-only access to one SQLite file (or, with ``connection``, to a private in-memory database
    its builder hands over: from then on the authorizer keeps it read-only)."""

    engine = "sqlite"
    dialect = "sqlite"

    def __init__(self, cfg: DatasourceConfig, *, keep_open: bool = False, bulk: bool = False,
                 reverse_scans: bool = False, connection: sqlite3.Connection | None = None) -> None:
        self.id = cfg.id
        self.keep_open = keep_open or bulk
        #: every table read in the other order (the gold audit): a result that leans on the rows'
        #: physical order (ties under ORDER BY ... LIMIT) shows it
        self.reverse_scans = reverse_scans
        self._check = check_first_keyword if bulk else lambda sql: check_read_only(sql, self.dialect)
        self._local = threading.local()  # keep_open: this thread's connection
        self._opened: list[sqlite3.Connection] = []
        self.path = Path(cfg.path)
        self.row_limit = cfg.row_limit
        self.timeout_s = cfg.timeout_s
        self._given = connection
        self._in_memory = connection is not None
        if connection is not None:  # an in-memory database (the witness search's candidates): no file
            self.keep_open = True
            self._uri = ""
            return
        if not self.path.is_file():
            raise DatasourceError(f"datasource {self.id!r}: SQLite file not found: {self.path} (its path in "
                                  "nl2sql.yaml; the demo's databases are made by `nl2sql-assets data`)")
        # mode=ro never creates a file; quote() keeps '?', '#' and spaces in the path literal.
        self._uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"

    def _connect(self) -> sqlite3.Connection:
        try:
            if self._in_memory:  # the one connection there is: taken once, by the thread that reads it
                conn, self._given = self._given, None
                if conn is None:
                    raise sqlite3.Error("an in-memory database is read on the thread that first read it")
            else:
                conn = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            if self.reverse_scans:  # made before the authorizer, which admits nothing but reads
                _reverse_every_table(conn)
            return conn
        except sqlite3.Error as exc:
            raise DatasourceError(f"datasource {self.id!r}: cannot open {self.path}: {exc}") from None

    def _statement_connection(self) -> sqlite3.Connection:
        """A connection for one statement, the authorizer set: a new one, or this thread's kept one."""
        if not self.keep_open:
            conn = self._connect()
            conn.set_authorizer(_authorizer)
            return conn
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.set_authorizer(_authorizer)
            self._local.conn = conn
            self._opened.append(conn)
        return conn

    def execute(
        self, sql: str, *, row_limit: int | None = None, timeout_s: float | None = None
    ) -> QueryOutput:
        statement = self._check(sql)
        limit = row_limit if row_limit is not None else self.row_limit
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        conn = self._statement_connection()
        started = time.monotonic()
        deadline = started + timeout
        timed_out = False

        def progress() -> int:
            nonlocal timed_out
            if time.monotonic() > deadline:
                timed_out = True
                return 1  # non-zero aborts the statement with "interrupted"
            return 0

        cursor = None
        try:
            conn.set_progress_handler(progress, _PROGRESS_STEPS)
            cursor = conn.execute(statement)
            columns = [d[0] for d in cursor.description or ()]
            rows = cursor.fetchmany(limit + 1)
        except sqlite3.Error as exc:
            message = str(exc)
            if timed_out or message == "interrupted":
                raise QueryTimeout(
                    f"datasource {self.id!r}: the query ran past its {timeout:g} s timeout"
                ) from None
            if (
                message.startswith("not authorized")
                or "readonly database" in message
                or "one statement at a time" in message
            ):
                raise ReadOnlyViolation(
                    f"datasource {self.id!r}: the database refused the statement: {message}"
                ) from None
            raise QueryFailed(f"datasource {self.id!r}: {message}") from None
        finally:
            if self.keep_open:
                if cursor is not None:
                    cursor.close()  # ends the statement: a kept connection holds no read lock
                conn.set_progress_handler(None, 0)
            else:
                conn.close()
        return QueryOutput.from_fetch(columns, rows, limit, started)

    def introspect(self) -> SchemaSnapshot:
        conn = self._connect()
        try:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                    "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
                )
            ]
            raw: dict[str, list[Any]] = {}
            for name in names:
                cols = conn.execute(
                    'SELECT cid, name, type, "notnull", pk FROM pragma_table_info(?)', (name,)
                ).fetchall()
                fks = conn.execute(
                    'SELECT id, seq, "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY id, seq',
                    (name,),
                ).fetchall()
                raw[name] = [cols, fks]
        except sqlite3.Error as exc:
            raise DatasourceError(
                f"datasource {self.id!r}: cannot read the schema of {self.path}: {exc}"
            ) from None
        finally:
            conn.close()

        pks = {
            name: [c[1] for c in sorted((c for c in cols if c[4]), key=lambda c: c[4])]
            for name, (cols, _) in raw.items()
        }
        lower = {n.lower(): n for n in names}
        tables = []
        for name in names:
            cols, fk_rows = raw[name]
            primary = pks[name]
            columns = [
                ColumnInfo(
                    name=c[1],
                    type=(c[2] or "").upper(),
                    nullable=not c[3] and c[1] not in primary,
                    primary_key=c[1] in primary,
                )
                for c in sorted(cols, key=lambda c: c[0])
            ]
            grouped: dict[int, list[Any]] = {}
            for fk_id, _seq, ref, src, dst in fk_rows:
                grouped.setdefault(fk_id, []).append((ref, src, dst))
            foreign_keys = []
            for parts in grouped.values():
                ref_table = lower.get(parts[0][0].lower(), parts[0][0])
                ref_pk = pks.get(ref_table, [])
                ref_cols = [
                    dst if dst is not None else (ref_pk[i] if i < len(ref_pk) else src)
                    for i, (_, src, dst) in enumerate(parts)
                ]
                foreign_keys.append(
                    ForeignKey(columns=[p[1] for p in parts], ref_table=ref_table, ref_columns=ref_cols)
                )
            foreign_keys.sort(key=lambda fk: (fk.columns, fk.ref_table))
            tables.append(
                TableInfo(name=name, columns=columns, primary_key=primary, foreign_keys=foreign_keys)
            )
        return SchemaSnapshot(datasource_id=self.id, engine=self.engine, tables=tables)

    def could_write(self) -> str | None:
        return None  # opened read-only by URI: no login, nothing to write with

    def close(self) -> None:
        """Close the kept connections (keep_open); otherwise nothing stays open between calls."""
        opened, self._opened = self._opened, []
        self._local = threading.local()
        for conn in opened:
            conn.close()


class SqliteSchemaCopy:
    """The schema's tables, empty, in an in-memory SQLite database: the final-SQL check's question
    to SQLite itself (``EXPLAIN`` compiles a statement, never runs it). Its authorizer reports
    every table and column the compiled statement reads. Used under a lock: threads share it."""

    def __init__(self, snapshot: SchemaSnapshot) -> None:
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
        if action == sqlite3.SQLITE_READ:
            self._reads.append((arg1 or "", arg2 or ""))
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA:  # pragma_* table functions: compiled, never run
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    def prepare(self, sql: str) -> tuple[str | None, frozenset[tuple[str, str]] | None]:
        with self._lock:
            self._reads = []
            try:
                self._conn.execute("EXPLAIN " + sql).close()
            except (sqlite3.Error, sqlite3.Warning, ValueError) as exc:
                message = str(exc) or type(exc).__name__
                # The copy's authorizer, or a function the real connection may have (an
                # extension, a build's own): the database that runs it decides those.
                if message.startswith(("not authorized", "no such function")):
                    return None, None
                return message, None
            return None, frozenset(self._reads)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqliteEngine(DatabaseEngine):
    """SQLite files, opened read-only by URI (the standard library's driver)."""

    name = "sqlite"
    label = "SQLite"
    dialect = "sqlite"
    system_prefixes = ("sqlite_", "pragma_")
    dangerous_functions = ("load_extension", "readfile", "writefile", "edit", "fts3_tokenizer")
    own_schemas = frozenset({"", "main"})
    pseudo_columns = frozenset({"rowid", "oid", "_rowid_"})
    double_quoted_strings = True
    integer_key_is_rowid = True
    sql_style = SqlStyle(date_parts={
        "year": "CAST(STRFTIME('%Y', {}) AS INTEGER)", "month": "CAST(STRFTIME('%m', {}) AS INTEGER)",
        "day": "CAST(STRFTIME('%d', {}) AS INTEGER)", "year_month": "STRFTIME('%Y-%m', {})", "date": "DATE({})"})

    def open(self, cfg: DatasourceConfig, *, bulk: bool = False) -> SqliteAdapter:
        return SqliteAdapter(cfg, bulk=bulk)

    def schema_copy(self, snapshot: SchemaSnapshot) -> SqliteSchemaCopy:
        return SqliteSchemaCopy(snapshot)


ENGINE = SqliteEngine()
