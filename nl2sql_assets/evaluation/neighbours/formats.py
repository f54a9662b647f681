"""The database files neighbours are made of, one object per engine: how a source's tables,
constraints and rows are read, how a neighbour file is written, and how one is opened read-only
to run SQL on. SQLite and DuckDB, registered once in ``FORMATS``.

A neighbour is written whole: the source's own CREATE statements, the rows (a row a constraint
refuses is left out, so the database itself keeps every key, NOT NULL and CHECK), then the views;
into a temporary file renamed into place and left read-only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import os
import re
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.evaluation.neighbours.tables import (
    ROW_LIMIT,
    TIMEOUT_S,
    Column,
    Source,
    Table,
    _replace_into,
    _temporary,
    parents_first,
)


def _read_only(name: str, engine: str, path: Path, timeout_s: float) -> DatasourceConfig:
    """The datasource settings a neighbour (or a copy of one) is opened with: its row limit and timeout."""
    return DatasourceConfig(id=name, engine=engine, path=path, row_limit=ROW_LIMIT, timeout_s=timeout_s)


class NeighbourFormat(Protocol):
    engine: ClassVar[str]
    suffix: ClassVar[str]
    dialect: ClassVar[str]
    #: databases worked on at once by threads (``side_by_side``): 1 for a file, whose work is this
    #: process's; more for a server, whose statements mostly wait on the network and the server
    side_by_side: ClassVar[int]

    def read(self, path: Path, max_rows: int | None) -> Source: ...

    def write(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]], path: Path) -> Path: ...

    def open(self, path: Path) -> Any: ...

    def open_reversed(self, path: Path, timeout_s: float = TIMEOUT_S) -> Any:
        """Read-only access to the same rows scanned in the other physical order."""
        ...

    def scratch(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]],
                template: Any = None) -> Scratch:
        """A short-lived database of ``source``'s schema holding ``rows`` (the witness search's
        candidates): read through the product's own read-only access, saved to a file when kept.
        ``template``: what ``template`` gave for this source (it saves making the schema again)."""
        ...

    def template(self, source: Source) -> Any:
        """The empty schema of ``source`` in whatever form makes ``scratch`` faster (None: nothing)."""
        ...


class Scratch(Protocol):
    """A candidate database: read forwards and backwards, saved whole when it is kept, then closed."""

    def adapter(self) -> Any: ...

    def reversed(self) -> Any: ...

    def save(self, path: Path) -> Path: ...

    def close(self) -> None: ...


class SqliteFiles:
    """SQLite: read through sqlite_master and the table pragmas, written with sqlite3."""

    engine: ClassVar[str] = "sqlite"
    suffix: ClassVar[str] = ".sqlite"
    side_by_side: ClassVar[int] = 1
    dialect: ClassVar[str] = "sqlite"

    def read(self, path: Path, max_rows: int | None) -> Source:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            others = conn.execute(
                "SELECT type, sql FROM sqlite_master WHERE type IN ('index', 'view', 'trigger') "
                "AND sql IS NOT NULL ORDER BY CASE type WHEN 'index' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, name"
            ).fetchall()
            tables: dict[str, Table] = {}
            for name, create_sql in conn.execute(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                    "ORDER BY name"):
                quoted = name.replace('"', '""')
                columns = [Column(r[1], r[2] or "", bool(r[3]), bool(r[5]))
                           for r in conn.execute(f'PRAGMA table_info("{quoted}")')]
                table = Table(name, create_sql, columns)
                for r in conn.execute(f'PRAGMA foreign_key_list("{quoted}")'):
                    parent, child_col, parent_col = r[2], r[3], r[4]
                    table.references[child_col] = (parent, parent_col or "rowid")
                limit = -1 if max_rows is None else int(max_rows)
                table.rows = [tuple(row) for row in conn.execute(f'SELECT * FROM "{quoted}" LIMIT {limit}')]
                tables[name] = table
        finally:
            conn.close()
        return Source(parents_first(tables), indexes=[sql for kind, sql in others if kind == "index"],
                      views=[sql for kind, sql in others if kind != "index"])

    def write(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]], path: Path) -> Path:
        temporary = _temporary(path)
        conn = sqlite3.connect(temporary)
        try:
            _fill_sqlite(conn, source, rows)
        finally:
            conn.close()
        return _replace_into(temporary, path)

    def open(self, path: Path) -> Any:
        """The product's own read-only access (row limit, a timeout that interrupts; SQLite's own checks)."""
        from nl2sql_assets.datasources.sqlite import SqliteAdapter

        config = _read_only("neighbour", "sqlite", path, TIMEOUT_S)
        return SqliteAdapter(config, bulk=True)

    def open_reversed(self, path: Path, timeout_s: float = TIMEOUT_S) -> Any:
        """The same file, every table read backwards (``SqliteAdapter(reverse_scans=True)``)."""
        from nl2sql_assets.datasources.sqlite import SqliteAdapter

        config = _read_only("reversed", "sqlite", path, timeout_s)
        return SqliteAdapter(config, bulk=True, reverse_scans=True)

    def scratch(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]],
                template: Any = None) -> Scratch:
        return SqliteScratch(source, rows, template)

    def template(self, source: Source) -> Any:
        return sqlite_template(source)


class SqliteScratch:
    """A private in-memory SQLite database (no file until it is saved): the source's schema (from
    ``template``, its serialized empty tables and indexes, where given: made once per search), the
    rows (a refused one left out), the views and triggers; read through ``SqliteAdapter``."""

    def __init__(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]],
                 template: bytes | None = None) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        if template is not None:
            self._conn.deserialize(template)
        self._readers: list[Any] = []
        _fill_sqlite(self._conn, source, rows, schema=template is None)

    def _open(self, conn: sqlite3.Connection, reverse: bool) -> Any:
        from nl2sql_assets.datasources.sqlite import SqliteAdapter

        config = _read_only("reversed" if reverse else "candidate", "sqlite", Path("candidate"), TIMEOUT_S)
        adapter = SqliteAdapter(config, bulk=True, reverse_scans=reverse, connection=conn)
        self._readers.append(adapter)
        return adapter

    def adapter(self) -> Any:
        return self._open(self._conn, False)

    def reversed(self) -> Any:
        """A copy of the database, every table read backwards (a copy: the reversing views are
        the reader's own)."""
        copy = sqlite3.connect(":memory:", check_same_thread=False)
        copy.deserialize(self._conn.serialize())
        return self._open(copy, True)

    def save(self, path: Path) -> Path:
        temporary = _temporary(path)
        target = sqlite3.connect(temporary)
        try:
            self._conn.backup(target)
        finally:
            target.close()
        return _replace_into(temporary, path)

    def close(self) -> None:
        for reader in self._readers:
            reader.close()
        self._conn.close()


def sqlite_template(source: Source) -> bytes:
    """``source``'s tables and indexes, empty, serialized: what each candidate database starts from."""
    conn = sqlite3.connect(":memory:")
    try:
        for table in source.tables:
            conn.execute(table.create_sql)
        for sql in source.indexes:
            conn.execute(sql)
        conn.commit()
        return conn.serialize()
    finally:
        conn.close()


def _fill_sqlite(conn: sqlite3.Connection, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]],
                 *, schema: bool = True) -> None:
    """The source's tables and indexes (``schema``: False where ``conn`` has them already), rows
    (each refused row left out) and views, into ``conn``."""
    conn.execute("PRAGMA foreign_keys = ON")
    if schema:
        for table in source.tables:
            conn.execute(table.create_sql)
        for sql in source.indexes:  # a UNIQUE index refuses a row as the table's own keys do
            conn.execute(sql)
    for table in source.tables:
        marks = ", ".join("?" for _ in table.columns)
        insert = f"INSERT INTO {table.quoted} VALUES ({marks})"
        batch = rows.get(table.name, ())
        if not batch:
            continue
        conn.execute("SAVEPOINT batch")  # the whole batch at once; a row refused: again, one row at a time
        try:
            conn.executemany(insert, batch)
            conn.execute("RELEASE batch")
            continue
        except sqlite3.IntegrityError:
            pass
        except sqlite3.OperationalError as exc:
            if "foreign key mismatch" not in str(exc):
                raise
        conn.execute("ROLLBACK TO batch")
        conn.execute("RELEASE batch")
        for row in batch:
            _insert_row(conn, insert, row)
    for sql in source.views:  # views and triggers once the rows are in (no trigger fires on them)
        conn.execute(sql)
    conn.commit()


def _insert_row(conn: sqlite3.Connection, insert: str, row: tuple[Any, ...]) -> None:
    """One row in, or left out where a constraint refuses it. A foreign key SQLite cannot enforce
    (its parent column is neither a key nor unique: "foreign key mismatch", as in some of Spider's
    schemas) is not enforced in the source either: the check is switched off, as the source has it."""
    try:
        conn.execute(insert, row)
    except sqlite3.IntegrityError:
        return  # a key taken twice, a NULL where none is allowed: the database says no
    except sqlite3.OperationalError as exc:
        if "foreign key mismatch" not in str(exc):
            raise
        conn.commit()
        conn.execute("PRAGMA foreign_keys = OFF")
        _insert_row(conn, insert, row)


class DuckdbFiles:
    """DuckDB: read through duckdb_tables(), duckdb_columns() and duckdb_constraints(), written
    with one connection per file."""

    engine: ClassVar[str] = "duckdb"
    suffix: ClassVar[str] = ".duckdb"
    side_by_side: ClassVar[int] = 1
    dialect: ClassVar[str] = "duckdb"

    def read(self, path: Path, max_rows: int | None) -> Source:
        import duckdb

        from nl2sql_assets.datasources.duckdb_adapter import CONNECT_CONFIG

        # the adapter's own settings: DuckDB refuses a second connection to a file with others
        conn = duckdb.connect(str(path), read_only=True, config=dict(CONNECT_CONFIG))
        try:
            found = conn.execute(
                "SELECT schema_name, table_name, sql FROM duckdb_tables() "
                "WHERE database_name = current_database() AND NOT internal AND NOT temporary "
                "ORDER BY schema_name, table_name").fetchall()
            constraints = conn.execute(
                "SELECT schema_name, table_name, constraint_type, constraint_column_names, referenced_table, "
                "referenced_column_names FROM duckdb_constraints() WHERE database_name = current_database()"
            ).fetchall()
            tables: dict[str, Table] = {}
            for schema, name, create_sql in found:
                keys = {c for s, t, kind, cols, _, _ in constraints if (s, t) == (schema, name)
                        and kind == "PRIMARY KEY" for c in cols}
                checked = {c for s, t, kind, cols, _, _ in constraints if (s, t) == (schema, name)
                           and kind == "CHECK" for c in cols}
                columns = [Column(n, t, not nullable, n in keys, n in checked) for n, t, nullable in conn.execute(
                    "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
                    "WHERE database_name = current_database() AND schema_name = ? AND table_name = ? "
                    "ORDER BY column_index", [schema, name]).fetchall()]
                table = Table(name, create_sql, columns, schema=None if schema == "main" else schema)
                for s, t, kind, cols, parent, parent_cols in constraints:
                    if (s, t) == (schema, name) and kind == "FOREIGN KEY" and len(cols) == 1 and parent:
                        table.references[cols[0]] = (parent, (parent_cols or [cols[0]])[0])
                limit = "" if max_rows is None else f" LIMIT {int(max_rows)}"
                table.rows = [tuple(r) for r in conn.execute(
                    f"SELECT * FROM {table.quoted} ORDER BY rowid{limit}").fetchall()]
                tables[name] = table
            indexes = [sql for (sql,) in conn.execute(
                "SELECT sql FROM duckdb_indexes() WHERE database_name = current_database() AND sql IS NOT NULL "
                "ORDER BY index_name").fetchall()]
            views = [sql for (sql,) in conn.execute(
                "SELECT sql FROM duckdb_views() WHERE database_name = current_database() AND NOT internal "
                "AND NOT temporary ORDER BY view_name").fetchall()]
            schemas = sorted({s for s, _, _ in found if s != "main"})
        finally:
            conn.close()
        return Source(parents_first(tables), indexes=indexes, views=views, schemas=schemas)

    def write(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]], path: Path) -> Path:
        import duckdb

        temporary = _temporary(path)
        temporary.with_name(temporary.name + ".wal").unlink(missing_ok=True)
        conn = duckdb.connect(str(temporary), config={"threads": 1})
        try:
            for schema in source.schemas:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            for table in source.tables:
                conn.execute(table.create_sql)
            for sql in source.indexes:
                conn.execute(sql)
            for table in source.tables:
                marks = ", ".join("?" for _ in table.columns)
                insert = f"INSERT INTO {table.quoted} VALUES ({marks})"
                _insert_all(conn, insert, list(rows.get(table.name, ())))
            for sql in source.views:
                conn.execute(sql)
            conn.execute("CHECKPOINT")
        finally:
            conn.close()
        return _replace_into(temporary, path)

    def open(self, path: Path) -> Any:
        from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter

        config = _read_only("neighbour", "duckdb", path, TIMEOUT_S)
        return DuckDBAdapter(config, bulk=True)

    def open_reversed(self, path: Path, timeout_s: float = TIMEOUT_S) -> Any:
        """A temporary copy whose tables hold their rows in the other order (DuckDB scans in
        insertion order on one thread), its views made again; removed on close."""

        folder = Path(tempfile.mkdtemp(prefix="nl2sql-reversed-"))
        copy = folder / "reversed.duckdb"
        source = self.read(path, max_rows=None)
        self.write(source, {t.name: t.rows[::-1] for t in source.tables}, copy)
        from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter

        config = _read_only("reversed", "duckdb", copy, timeout_s)
        return _RemovedOnClose(DuckDBAdapter(config, bulk=True), folder)


    def scratch(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]],
                template: Any = None) -> Scratch:
        return DuckdbScratch(source, rows, template)

    def template(self, source: Source) -> Any:
        return DuckdbMemory(source)


class DuckdbMemory:
    """In-memory DuckDB databases of one source's schema, one pair per thread (forwards, backwards),
    refilled for each candidate: connecting costs about 14 ms, dropping and making four tables again
    a few. Closed to the outside: no external access, the configuration locked."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._local = threading.local()

    def fill(self, rows: Mapping[str, Sequence[tuple[Any, ...]]], *, backwards: bool = False) -> Any:
        """This thread's database (its backwards one), holding ``rows`` alone (each refused row left out)."""
        import duckdb

        name = "backwards" if backwards else "forwards"
        conn = getattr(self._local, name, None)
        if conn is None:
            conn = duckdb.connect(":memory:", config={"threads": 1, "enable_external_access": False})
            conn.execute("SET lock_configuration = true")
            for schema in self.source.schemas:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            setattr(self._local, name, conn)
        for (view,) in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary "
                                    "AND database_name = current_database()").fetchall():
            conn.execute(f'DROP VIEW "{view}"')
        for table in reversed(self.source.tables):  # children first: nothing points at a dropped table
            conn.execute(f"DROP TABLE IF EXISTS {table.quoted}")
        for table in self.source.tables:
            conn.execute(table.create_sql)
        for sql in self.source.indexes:
            conn.execute(sql)
        for table in self.source.tables:
            marks = ", ".join("?" for _ in table.columns)
            batch = list(rows.get(table.name, ()))
            _insert_all(conn, f"INSERT INTO {table.quoted} VALUES ({marks})", batch[::-1] if backwards else batch)
        for sql in self.source.views:
            conn.execute(sql)
        return conn

    def close(self) -> None:
        """This thread's databases closed."""
        for name in ("forwards", "backwards"):
            conn = getattr(self._local, name, None)
            if conn is not None:
                conn.close()
                setattr(self._local, name, None)


class DuckdbScratch:
    """An in-memory DuckDB candidate (no file until it is saved), read through ``DuckDBAdapter``;
    read backwards from a second database holding the rows in the other order (DuckDB scans in
    insertion order on one thread)."""

    def __init__(self, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]],
                 memory: DuckdbMemory | None = None) -> None:
        self.source, self.rows = source, rows
        self.memory = memory or DuckdbMemory(source)
        self._owned = memory is None  # a memory of its own is closed with it
        self._conn = self.memory.fill(rows)

    def _open(self, conn: Any) -> Any:
        from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter

        return DuckDBAdapter(_read_only("candidate", "duckdb", Path("candidate"), TIMEOUT_S), bulk=True,
                             connection=conn, borrowed=True)

    def adapter(self) -> Any:
        return self._open(self._conn)

    def reversed(self) -> Any:
        return self._open(self.memory.fill(self.rows, backwards=True))

    def save(self, path: Path) -> Path:
        return DuckdbFiles().write(self.source, self.rows, path)

    def close(self) -> None:
        if self._owned:
            self.memory.close()


class _RemovedOnClose:
    """An adapter over a temporary file, whose folder goes when the adapter is closed."""

    def __init__(self, adapter: Any, folder: Path) -> None:
        self.adapter, self.folder = adapter, folder

    def execute(self, sql: str, **kwargs: Any) -> Any:
        return self.adapter.execute(sql, **kwargs)

    def close(self) -> None:
        self.adapter.close()
        shutil.rmtree(self.folder, ignore_errors=True)


#: rows a DuckDB INSERT statement carries at once
VALUES_BATCH = 500


def _insert_all(conn: Any, insert: str, rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows``, leaving out each one the database refuses (a key taken twice, a NULL, a
    CHECK): a batch at a time, a refused batch split in halves, so a few bad rows cost a few
    batches and not a statement per row."""
    import duckdb

    if not rows:
        return
    head, marks = insert.rsplit(" VALUES ", 1)
    try:
        conn.execute("BEGIN")
        for start in range(0, len(rows), VALUES_BATCH):  # one statement per batch: executemany runs one per row
            batch = rows[start:start + VALUES_BATCH]
            conn.execute(f"{head} VALUES {', '.join([marks] * len(batch))}", [v for row in batch for v in row])
        conn.execute("COMMIT")
        return
    except duckdb.Error:
        conn.execute("ROLLBACK")
    if len(rows) > 1:
        middle = len(rows) // 2
        _insert_all(conn, insert, rows[:middle])
        _insert_all(conn, insert, rows[middle:])


#: Every engine neighbours can be made of, by the datasource engine's name.
FORMATS: dict[str, NeighbourFormat] = {"sqlite": SqliteFiles(), "duckdb": DuckdbFiles()}


T = TypeVar("T")
R = TypeVar("R")


def side_by_side(files: NeighbourFormat, work: Callable[[T], R], items: Iterable[T], *,
                 width: int | None = None) -> list[R]:
    """``work`` over ``items``, in order: in this thread, or on ``width`` threads (default the
    format's ``side_by_side``) where that is more than one."""
    width = files.side_by_side if width is None else width
    if width <= 1:
        return [work(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=width, thread_name_prefix=f"nl2sql-{files.engine}") as threads:
        return list(threads.map(work, items))


def pool_size(tasks: int) -> int:
    """Worker processes for ``tasks`` databases: one per core, none from a daemonic process (a
    Celery worker's child may not have children of its own: the work is done in it then)."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return 1
    return max(1, min(os.cpu_count() or 1, tasks))


#: server engines whose neighbours are namespaces on a scratch server (``servers``), made on first use
SERVER_ENGINES = ("postgres", "mysql")
_SERVER_FORMATS: dict[str, Any] = {}


def format_of(engine: str) -> NeighbourFormat:
    """The neighbour format of an engine: a file format, or a server's (``servers.ServerFiles``)."""
    if engine in FORMATS:
        return FORMATS[engine]
    if engine in SERVER_ENGINES:
        if engine not in _SERVER_FORMATS:
            from nl2sql_assets.evaluation.neighbours.servers import ServerFiles

            _SERVER_FORMATS[engine] = ServerFiles(engine)
        return _SERVER_FORMATS[engine]
    raise ValueError(f"neighbour databases are made of {', '.join([*FORMATS, *SERVER_ENGINES])} datasources, "
                     f"not {engine}")


def fingerprint(path: Path, engine: str, max_rows: int) -> str:
    """What a set's neighbours depend on of their source: a file's bytes, a server's catalog and
    sampled rows."""
    files = format_of(engine)
    if hasattr(files, "fingerprint"):
        return files.fingerprint(path, max_rows)
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def discard(path: Path, engine: str) -> None:
    """A candidate not kept: a server's namespace dropped (a file goes with its folder)."""
    files = format_of(engine)
    if hasattr(files, "discard"):
        files.discard(path)


def format_of_file(path: Path) -> NeighbourFormat:
    """The format of a neighbour file, by its suffix."""
    return next((f for f in FORMATS.values() if path.suffix == f.suffix), FORMATS["sqlite"])


def shifted(value: Any, step: int) -> Any:
    """``value`` one step up or down in its own kind (numbers by one, dates by a day); None where
    it has no neighbour value."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | decimal.Decimal):
        return value + step
    if isinstance(value, dt.datetime | dt.date):
        return value + dt.timedelta(days=step)
    return None


def moment_of(literal: Any, kind: type) -> Any:
    """A string literal read as the column's date or timestamp (None where it reads as neither)."""
    if not isinstance(literal, str):
        return None
    try:
        value = dt.datetime.fromisoformat(literal)
    except ValueError:
        return None
    return value if kind is dt.datetime else value.date() if kind is dt.date else None


def shape_of(text: str) -> str:
    """'2003-01-01 00:00:00' -> '9999-99-99 99:99:99': what a column's values look like."""
    return re.sub(r"[A-Za-z]", "a", re.sub(r"\d", "9", text))


def in_format(literal: str, values: Sequence[str]) -> str | None:
    """``literal`` as the column writes its values: as it is in a free-text column or where it has
    their shape; completed from a value that starts with its shape (a date compared with a column
    of datetimes becomes that datetime at midnight); None where it cannot be written that way."""
    shapes = {shape_of(v) for v in values}
    if len(shapes) != 1 or shape_of(literal) in shapes:
        return literal
    for value in values:
        if shape_of(value).startswith(shape_of(literal)):
            return literal + value[len(literal):]
    return None
