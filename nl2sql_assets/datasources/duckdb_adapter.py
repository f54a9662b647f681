"""The DuckDB adapter: one read-only connection kept open, a cursor per call.

Opening a DuckDB file costs about 14 ms, so the connection stays open; each call takes its own
cursor, which makes calls from several threads safe. External access (files, ATTACH, COPY,
extensions) is switched off and the configuration locked, behind the statement guard.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.datasources.base import (
    DatasourceError,
    QueryFailed,
    QueryOutput,
    QueryTimeout,
    ReadOnlyViolation,
)
from nl2sql_assets.datasources.engines import DatabaseEngine, SqlStyle
from nl2sql_assets.datasources.guard import check_read_only
from nl2sql_assets.datasources.schema import ColumnInfo, ForeignKey, SchemaSnapshot, TableInfo

if TYPE_CHECKING:
    import duckdb


def _duckdb() -> Any:
    """The duckdb module, imported on first use: loading a project that names a DuckDB file (its
    engine is checked) must not cost duckdb's 40 ms import when nothing reads the file."""
    import duckdb

    return duckdb


CONNECT_CONFIG: dict[str, Any] = {
    "threads": 1,  # about 25% faster than the default on small data and 2 cores
    "enable_external_access": False,
    "lock_configuration": True,
}


def _qualified(schema: str, table: str) -> str:
    return table if schema == "main" else f"{schema}.{table}"


class DuckDBAdapter:
    """Read-only access to one DuckDB file."""

    engine = "duckdb"
    dialect = "duckdb"

    def __init__(self, cfg: DatasourceConfig, *, bulk: bool = False,
                 connection: duckdb.DuckDBPyConnection | None = None, borrowed: bool = False) -> None:
        """``bulk`` (neighbour databases: thousands of statements on small files) leaves the
        statement to DuckDB's own checks, which are the deepest layer anyway: exactly one SELECT-type
        statement (its own parser), a read-only connection, no external access, the configuration
        locked. The sqlglot guard it skips costs about as much as the query itself there.
        ``connection``: an in-memory database its builder hands over (the witness search's
        candidates), its external access off and its configuration locked; only reads run on it
        (``borrowed``: its builder closes it, not the adapter)."""
        self.id = cfg.id
        self._check = (lambda sql: sql.rstrip().rstrip(";").rstrip()) if bulk else (
            lambda sql: check_read_only(sql, self.dialect))
        self.path = Path(cfg.path)
        self.row_limit = cfg.row_limit
        self.timeout_s = cfg.timeout_s
        self._lock = threading.Lock()
        self._conn: duckdb.DuckDBPyConnection | None = connection
        self._borrowed = borrowed
        if connection is not None:
            return
        if not self.path.is_file():
            raise DatasourceError(f"datasource {self.id!r}: DuckDB file not found: {self.path} (its path in "
                                  "nl2sql.yaml; the demo's databases are made by `nl2sql-assets data`)")
        self._connection()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None:
            try:
                self._conn = _duckdb().connect(str(self.path), read_only=True, config=dict(CONNECT_CONFIG))
            except _duckdb().Error as exc:
                raise DatasourceError(f"datasource {self.id!r}: cannot open {self.path}: {exc}") from None
        return self._conn

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._connection().cursor()

    def execute(
        self, sql: str, *, row_limit: int | None = None, timeout_s: float | None = None
    ) -> QueryOutput:
        statement = self._check(sql)
        limit = row_limit if row_limit is not None else self.row_limit
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        cursor = self._cursor()
        fired = threading.Event()

        def interrupt() -> None:
            fired.set()
            with contextlib.suppress(_duckdb().Error):  # the call may have just finished and closed it
                cursor.interrupt()

        timer = threading.Timer(timeout, interrupt)
        timer.daemon = True
        started = time.monotonic()
        try:
            # DuckDB's own parser is the second opinion: exactly one SELECT-type statement.
            parsed = cursor.extract_statements(statement)
            if len(parsed) != 1 or parsed[0].type != _duckdb().StatementType.SELECT:
                kinds = ", ".join(p.type.name for p in parsed) or "none"
                raise ReadOnlyViolation(f"datasource {self.id!r}: only one read query may run (got {kinds})")
            timer.start()
            cursor.execute(statement)
            columns = [d[0] for d in cursor.description or ()]
            rows = cursor.fetchmany(limit + 1)
        except _duckdb().InterruptException:
            raise QueryTimeout(
                f"datasource {self.id!r}: the query ran past its {timeout:g} s timeout"
            ) from None
        except _duckdb().Error as exc:
            if fired.is_set():
                raise QueryTimeout(
                    f"datasource {self.id!r}: the query ran past its {timeout:g} s timeout"
                ) from None
            raise QueryFailed(f"datasource {self.id!r}: {exc}") from None
        finally:
            timer.cancel()
            cursor.close()
        return QueryOutput.from_fetch(columns, rows, limit, started)

    def introspect(self) -> SchemaSnapshot:
        cursor = self._cursor()
        try:
            relations = cursor.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() "
                "WHERE database_name = current_database() AND NOT internal AND NOT temporary "
                "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
                "WHERE database_name = current_database() AND NOT internal AND NOT temporary"
            ).fetchall()
            columns = cursor.execute(
                "SELECT schema_name, table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
                "WHERE database_name = current_database() AND NOT internal "
                "ORDER BY schema_name, table_name, column_index"
            ).fetchall()
            constraints = cursor.execute(
                "SELECT schema_name, table_name, constraint_type, constraint_column_names, referenced_table, "
                "referenced_column_names FROM duckdb_constraints() "
                "WHERE database_name = current_database() AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY') "
                "ORDER BY schema_name, table_name, constraint_index"
            ).fetchall()
        except _duckdb().Error as exc:
            raise DatasourceError(
                f"datasource {self.id!r}: cannot read the schema of {self.path}: {exc}"
            ) from None
        finally:
            cursor.close()

        cols: dict[str, list[tuple[str, str, bool]]] = {}
        for schema, table, name, data_type, nullable in columns:
            cols.setdefault(_qualified(schema, table), []).append(
                (name, str(data_type).upper(), bool(nullable))
            )
        pks: dict[str, list[str]] = {}
        fks: dict[str, list[ForeignKey]] = {}
        for schema, table, kind, col_names, ref_table, ref_cols in constraints:
            key = _qualified(schema, table)
            if kind == "PRIMARY KEY":
                pks[key] = list(col_names)
            elif ref_table:
                fks.setdefault(key, []).append(
                    ForeignKey(
                        columns=list(col_names),
                        ref_table=_qualified(schema, ref_table),
                        ref_columns=list(ref_cols),
                    )
                )
        tables = []
        for name in sorted({_qualified(s, t) for s, t in relations}):
            primary = pks.get(name, [])
            tables.append(
                TableInfo(
                    name=name,
                    columns=[
                        ColumnInfo(name=c, type=t, nullable=n, primary_key=c in primary)
                        for c, t, n in cols.get(name, [])
                    ],
                    primary_key=primary,
                    foreign_keys=sorted(fks.get(name, []), key=lambda fk: (fk.columns, fk.ref_table)),
                )
            )
        return SchemaSnapshot(datasource_id=self.id, engine=self.engine, tables=tables)

    def could_write(self) -> str | None:
        return None  # opened read_only: no login, nothing to write with

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and not self._borrowed:
                self._conn.close()
            self._conn = None


class DuckdbSchemaCopy:
    """The schema's tables, empty, in an in-memory DuckDB (external access off, configuration
    locked): ``EXPLAIN`` binds a statement's names, never runs it. Only errors of names and syntax
    are the SQL's; DuckDB reports no column reads. Used under a lock: threads share it."""

    def __init__(self, snapshot: SchemaSnapshot) -> None:
        self._lock = threading.Lock()
        self._conn = _duckdb().connect(":memory:", config={"enable_external_access": False, "threads": 1})
        for table in snapshot.tables:
            if "." in table.name or not table.columns:
                continue
            for typed in (True, False):  # the snapshot's types, else VARCHAR where one does not parse
                columns = ", ".join(f"{_quote(c.name)} {(c.type if typed and c.type else 'VARCHAR')}"
                                    for c in table.columns)
                try:
                    self._conn.execute(f"CREATE TABLE {_quote(table.name)} ({columns})")
                    break
                except _duckdb().Error:
                    continue
        self._conn.execute("SET lock_configuration = true")

    def prepare(self, sql: str) -> tuple[str | None, frozenset[tuple[str, str]] | None]:
        with self._lock:
            try:
                self._conn.execute("EXPLAIN " + sql).fetchall()
            except _duckdb().Error as exc:
                message = _first_line(str(exc))
                # Only errors of names and syntax are the SQL's: a type error may come from the
                # copy's column types, which the real database decides when the statement runs.
                if any(marker in message for marker in _NAME_ERRORS):
                    return message, None
            return None, None


_NAME_ERRORS = ("Parser Error", "Table with name", "Referenced column", "Referenced table",
                "Ambiguous reference", "not found in FROM clause", "does not have a column")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[:2])[:300] if lines else "the statement could not be prepared"


class DuckdbEngine(DatabaseEngine):
    """DuckDB files, opened read_only with external access off and the configuration locked."""

    name = "duckdb"
    label = "DuckDB"
    dialect = "duckdb"
    system_schemas = frozenset({"information_schema", "pg_catalog", "system", "temp"})
    system_prefixes = ("duckdb_", "pragma_", "pg_")
    system_functions = frozenset({"current_setting", "getvariable", "which_secret"})
    dangerous_functions = ("read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_json_objects",
                           "read_ndjson", "read_parquet", "parquet_scan", "read_text", "read_blob", "glob",
                           "sniff_csv")
    own_schemas = frozenset({"", "main"})
    pseudo_columns = frozenset({"rowid"})
    sql_style = SqlStyle(
        like="ILIKE", string_agg="STRING_AGG", integer_division=False,
        cast_types={"integer": "INTEGER", "real": "DOUBLE", "text": "VARCHAR"},
        date_parts={"year": "YEAR({})", "month": "MONTH({})", "day": "DAY({})",
                    "year_month": "STRFTIME({}, '%Y-%m')", "date": "STRFTIME({}, '%Y-%m-%d')"})

    def open(self, cfg: DatasourceConfig, *, bulk: bool = False) -> DuckDBAdapter:
        return DuckDBAdapter(cfg, bulk=bulk)

    def schema_copy(self, snapshot: SchemaSnapshot) -> DuckdbSchemaCopy:
        return DuckdbSchemaCopy(snapshot)


ENGINE = DuckdbEngine()
