"""The Postgres engine: read-only and bounded by the server's own rules, through psycopg2.

Every statement runs alone in its own transaction, which is rolled back whatever happens:

* ``BEGIN READ ONLY`` (the session is read-only), then the settings pinned for this statement with
  ``SET LOCAL``: ``statement_timeout``, ``lock_timeout``, ``idle_in_transaction_session_timeout``,
  ``search_path`` (the datasource's schemas) and ``standard_conforming_strings`` (so the statement
  guard reads strings as the server does). The rollback undoes every setting the statement may
  have changed, ``set_config(..., false)`` included, so a pooled connection never carries one on.
* The statement is declared as a server-side cursor (``DECLARE ... CURSOR FOR``), which admits
  only a query: no write, DDL or data-modifying CTE can run that way. One ``FETCH`` reads the row
  limit and one more, so a 12-million-row result costs no more memory than the limit.
* Three round trips a statement: ``BEGIN READ ONLY`` with the settings, ``DECLARE`` with the
  ``FETCH``, ``ROLLBACK`` (the connection is in autocommit mode: every transaction is ours).
* The server stops the statement at ``statement_timeout``; the client cancels it too, half a
  second later, should the server not have.

The statement guard (one read query, no ``SELECT ... INTO``) runs first, always: Postgres would
run two statements sent in one string, so the guard's count of statements is never skipped.
Functions that read files, other sessions or server settings are the final-SQL policy check's
(an allow-list of what a data question needs).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from decimal import Decimal
from typing import Any

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.datasources.base import (
    DatasourceError,
    DatasourceUnavailable,
    QueryFailed,
    QueryOutput,
    QueryTimeout,
    ReadOnlyViolation,
)
from nl2sql_assets.datasources.engines import DatabaseEngine, SqlStyle, TableData
from nl2sql_assets.datasources.guard import check_server_statement
from nl2sql_assets.datasources.schema import ColumnInfo, ForeignKey, SchemaSnapshot, TableInfo
from nl2sql_assets.datasources.server import CLIENT_GRACE_S, ConnectionPool, ServerAddress, Watchdog

CONNECT_TIMEOUT_S = 5


def _driver() -> Any:
    try:
        import psycopg2
        import psycopg2.extensions
    except ImportError:  # pragma: no cover - a dependency of the package
        raise DatasourceError("the Postgres driver psycopg2 is not installed: pip install psycopg2-binary") from None
    return psycopg2


class PostgresAdapter:
    """Read-only access to the tables of one Postgres database (its configured schemas)."""

    engine = "postgres"
    dialect = "postgres"

    def __init__(self, cfg: DatasourceConfig, *, bulk: bool = False) -> None:
        self.id = cfg.id
        self.row_limit = cfg.row_limit
        self.timeout_s = cfg.timeout_s
        self.address = ServerAddress.of(cfg, ("postgresql", "postgres"), 5432)
        #: the database: ``database:`` where given (neighbour databases live beside the source's), else the URL's
        self.database = cfg.database or self.address.database
        self.where = self.address.where("Postgres", cfg.id, self.database)
        self._schemas = list(cfg.schemas)
        self._pg = _driver()
        self._pool: ConnectionPool[Any] = ConnectionPool(self._connect, lambda c: c.close(), cfg.pool_size)
        # The statement guard is never skipped here (bulk or not): it is what counts statements,
        # and the server statement check refuses what a read-only transaction does not stop.
        self._check = lambda sql: check_server_statement(sql, ENGINE)
        self._search_path: str | None = None
        with self._pool.connection() as held:  # the first connection: reachable, logged in, schemas there
            self._resolve_search_path(held.conn)

    # ------------------------------------------------------------ connections

    def _connect(self) -> Any:
        a = self.address
        try:
            conn = self._pg.connect(host=a.host, port=a.port, user=a.user, password=a.password, dbname=self.database,
                                    connect_timeout=CONNECT_TIMEOUT_S, application_name="nl2sql-assets",
                                    **{k: v for k, v in a.params.items() if k in ("sslmode", "sslrootcert")})
        except self._pg.OperationalError as exc:
            raise DatasourceUnavailable(f"{self.where}: cannot connect: {_first_line(exc)}; check that the server "
                                        "runs and accepts this user from here (the URL in url_env)") from None
        # autocommit: every transaction is begun and ended here, explicitly (BEGIN READ ONLY ...
        # ROLLBACK), in as few round trips as a statement allows; the session's default is read-only too
        conn.set_session(readonly=True, autocommit=True)
        return conn

    def _resolve_search_path(self, conn: Any) -> None:
        """The schemas statements resolve names in: the configured ones (each must exist), else
        the session's own search path as the server reports it."""
        with conn.cursor() as cur:
            try:
                if self._schemas:
                    cur.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", (self._schemas,))
                    found = {r[0] for r in cur.fetchall()}
                    missing = [s for s in self._schemas if s not in found]
                    if missing:
                        raise DatasourceError(f"{self.where}: no schema {', '.join(missing)} in the database (schemas: "
                                              "in nl2sql.yaml); the schemas there: " + ", ".join(self._all_schemas(cur)))
                    schemas = list(self._schemas)
                else:
                    cur.execute("SELECT unnest(current_schemas(false))")
                    schemas = [r[0] for r in cur.fetchall()]
            finally:
                conn.rollback()
        self.schemas = schemas
        self._search_path = ", ".join(_quote(s) for s in schemas) or "pg_catalog"

    @staticmethod
    def _all_schemas(cur: Any) -> list[str]:
        cur.execute("SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
                    "AND nspname <> 'information_schema' ORDER BY 1")
        return [r[0] for r in cur.fetchall()]

    def _pin(self, cur: Any, timeout: float, *, read_only: bool = True) -> None:
        """Begin the statement's own transaction with its settings, which the ROLLBACK that ends it
        undoes (one round trip)."""
        cur.execute(self._pinned(cur, timeout, read_only=read_only))

    def _pinned(self, cur: Any, timeout: float, *, read_only: bool = True) -> str:
        """``_pin``'s statements, their values written in: sent in one message with what follows
        them, each later statement in the message runs under the settings they make (Postgres 13 and
        later time each statement of a message apart, under the statement_timeout it starts with)."""
        ms = max(1, int(timeout * 1000))
        pinned = cur.mogrify(
            f"BEGIN {'READ ONLY' if read_only else 'READ WRITE'}; "
            "SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true), "
            "set_config('idle_in_transaction_session_timeout', %s, true), "
            "set_config('standard_conforming_strings', 'on', true), set_config('search_path', %s, true)",
            (str(ms), str(ms), str(ms + 5000), self._search_path))
        from psycopg2.extensions import encodings

        return pinned.decode(encodings.get(cur.connection.encoding, "utf-8"))

    def _end(self, cur: Any, held: Any) -> None:
        """End the statement's transaction: nothing it did or set stays."""
        try:
            cur.execute("ROLLBACK")
        except self._pg.Error:
            held.broken = True

    # ------------------------------------------------------------ statements

    def execute(self, sql: str, *, row_limit: int | None = None, timeout_s: float | None = None) -> QueryOutput:
        statement = self._check(sql)
        limit = row_limit if row_limit is not None else self.row_limit
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        pg = self._pg
        with self._pool.connection() as held:
            conn = held.conn
            cursor = conn.cursor()
            started = time.monotonic()
            watchdog = Watchdog(conn.cancel, timeout + CLIENT_GRACE_S)
            try:
                with watchdog:
                    # The statement's own transaction and settings, then a cursor on the server (the
                    # statement may only be a query) read up to the row limit and one more: one round
                    # trip, however large the result would be (no parameters: a % in it stays as it is)
                    cursor.execute(f"{self._pinned(cursor, timeout)}; "
                                   f"DECLARE nl2sql_statement NO SCROLL CURSOR FOR {statement}; "
                                   f"FETCH FORWARD {limit + 1} FROM nl2sql_statement")
                    rows: list[Any] = cursor.fetchall()
                    types = [d.type_code for d in cursor.description or ()]
                    columns = [d.name for d in cursor.description or ()]
            except pg.errors.QueryCanceled:
                raise QueryTimeout(f"{self.where}: the query ran past its {timeout:g} s timeout") from None
            except (pg.errors.ReadOnlySqlTransaction, pg.errors.InsufficientPrivilege) as exc:
                raise ReadOnlyViolation(f"{self.where}: the database refused the statement: {_first_line(exc)}") \
                    from None
            except pg.OperationalError as exc:
                held.broken = True
                if watchdog.fired.is_set():
                    raise QueryTimeout(f"{self.where}: the query ran past its {timeout:g} s timeout") from None
                raise DatasourceUnavailable(f"{self.where}: the connection failed: {_first_line(exc)}") from None
            except pg.InterfaceError as exc:
                held.broken = True
                raise DatasourceUnavailable(f"{self.where}: the connection failed: {_first_line(exc)}") from None
            except pg.Error as exc:
                raise QueryFailed(f"{self.where}: {_first_line(exc)}") from None
            finally:
                if not held.broken:
                    self._end(cursor, held)
                cursor.close()
            return QueryOutput.from_fetch(columns, normalise_postgres(rows, types), limit, started)

    # ------------------------------------------------------------ the catalog

    def introspect(self) -> SchemaSnapshot:
        """Tables and views of the schemas (the first schema's by their own name, the others'
        as ``schema.table``), their columns, types, keys, foreign keys and comments."""
        with self._pool.connection() as held:
            conn = held.conn
            try:
                with conn.cursor() as cur:
                    cur.execute(_RELATIONS, (self.schemas,))
                    relations = cur.fetchall()
                    cur.execute(_COLUMNS, (self.schemas,))
                    columns = cur.fetchall()
                    cur.execute(_KEYS, (self.schemas,))
                    keys = cur.fetchall()
            except self._pg.Error as exc:
                raise DatasourceError(f"{self.where}: cannot read the catalog: {_first_line(exc)}") from None
            finally:
                conn.rollback()
        return _snapshot(self.id, self.schemas, relations, columns, keys)

    def statement_reads(self, sql: str) -> tuple[str | None, frozenset[tuple[str, str]] | None]:
        """The database's own word on ``sql``, which it never runs: ``(error, None)`` when it
        cannot prepare it against the schema (its message), else ``(None, reads)``: every
        (table, column) its parse analysis resolved, named as the snapshot names them. Read from
        the column dependencies of a temporary view of it, made in a transaction of its own that is
        rolled back (``(None, None)`` where the role may not make one: nothing to say)."""
        try:
            statement = self._check(sql)
        except DatasourceError:
            return None, None  # the policy check's own rules refuse it
        pg = self._pg
        with self._pool.connection() as held:
            cur = held.conn.cursor()
            try:
                self._pin(cur, self.timeout_s, read_only=False)  # a temporary view, rolled back below
                cur.execute("CREATE TEMP VIEW nl2sql_statement_reads AS " + statement)
                cur.execute(_VIEW_READS)
                found = cur.fetchall()
            except (pg.errors.InsufficientPrivilege, pg.errors.ReadOnlySqlTransaction,
                    pg.errors.FeatureNotSupported):
                return None, None
            except pg.OperationalError:
                held.broken = True
                return None, None
            except pg.Error as exc:
                return _first_line(exc), None
            finally:
                if not held.broken:
                    self._end(cur, held)
                cur.close()
        first = self.schemas[0] if self.schemas else "public"
        return None, frozenset((table if schema == first else f"{schema}.{table}", column or "")
                               for schema, table, column in found)

    def could_write(self) -> str | None:
        """Why the connecting role could change data (superuser, or a write privilege on a table
        of the schemas, or CREATE on one), or None: the recipe for a read-only role is in the README."""
        with self._pool.connection() as held:
            conn = held.conn
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT rolsuper, current_user FROM pg_roles WHERE rolname = current_user")
                    found = cur.fetchone()
                    if found and found[0]:
                        return f"role {found[1]} is a superuser"
                    cur.execute(_WRITABLE, (self.schemas, self.schemas))
                    writable = [r[0] for r in cur.fetchall()]
            finally:
                conn.rollback()
        if writable:
            return f"role {self.address.user} may write to {', '.join(writable[:5])}" + (
                f" and {len(writable) - 5} more" if len(writable) > 5 else "")
        return None

    def close(self) -> None:
        self._pool.close()
        self._pool.reopen()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _server_type(source_type: str, source_dialect: str, dialect: str) -> str:
    """A column type written in ``source_dialect`` as ``dialect`` writes it (TEXT where it has none)."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    if not source_type.strip():
        return "TEXT"
    try:
        return exp.DataType.build(source_type, dialect=source_dialect).sql(dialect=dialect)
    except (SqlglotError, ValueError):
        return "TEXT"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.splitlines()[:1])[:300]


_RELATIONS = """
SELECT n.nspname, c.relname, c.relkind, obj_description(c.oid, 'pg_class')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND n.nspname = ANY(%s) AND NOT c.relispartition
ORDER BY n.nspname, c.relname
"""
_COLUMNS = """
SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       col_description(c.oid, a.attnum)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'm', 'p', 'f') AND n.nspname = ANY(%s)
ORDER BY n.nspname, c.relname, a.attnum
"""
_KEYS = """
SELECT n.nspname, c.relname, k.contype,
       ARRAY(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY u(num, i)
             JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.num ORDER BY u.i),
       rn.nspname, rc.relname,
       ARRAY(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY u(num, i)
             JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.num ORDER BY u.i)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class rc ON rc.oid = k.confrelid LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE k.contype IN ('p', 'f') AND n.nspname = ANY(%s)
ORDER BY n.nspname, c.relname, k.conname
"""
_VIEW_READS = """
SELECT n.nspname, c.relname, a.attname
FROM pg_depend d
JOIN pg_rewrite r ON r.oid = d.objid AND d.classid = 'pg_rewrite'::regclass
JOIN pg_class c ON c.oid = d.refobjid AND d.refclassid = 'pg_class'::regclass
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid AND d.refobjsubid > 0
WHERE r.ev_class = 'nl2sql_statement_reads'::regclass AND d.refobjid <> r.ev_class
"""
_WRITABLE = """
SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname = ANY(%s)
  AND (has_table_privilege(c.oid, 'INSERT') OR has_table_privilege(c.oid, 'UPDATE')
       OR has_table_privilege(c.oid, 'DELETE') OR has_table_privilege(c.oid, 'TRUNCATE'))
UNION ALL
SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname = ANY(%s) AND has_schema_privilege(oid, 'CREATE')
"""


def _snapshot(datasource: str, schemas: list[str], relations: list[Any], columns: list[Any],
              keys: list[Any]) -> SchemaSnapshot:
    first = schemas[0] if schemas else "public"

    def name(schema: str, table: str) -> str:
        return table if schema == first else f"{schema}.{table}"

    cols: dict[str, list[ColumnInfo]] = {}
    pks: dict[str, list[str]] = {}
    fks: dict[str, list[ForeignKey]] = {}
    for schema, table, kind, cols_of, ref_schema, ref_table, ref_cols in keys:
        if kind == "p":
            pks[name(schema, table)] = list(cols_of)
        elif ref_table is not None:
            fks.setdefault(name(schema, table), []).append(
                ForeignKey(columns=list(cols_of), ref_table=name(ref_schema, ref_table), ref_columns=list(ref_cols)))
    for schema, table, column, typ, not_null, comment in columns:
        key = name(schema, table)
        primary = pks.get(key, [])
        cols.setdefault(key, []).append(ColumnInfo(name=column, type=typ.upper(), nullable=not not_null and
                                                   column not in primary, primary_key=column in primary,
                                                   description=comment or None))
    tables = []
    for schema, table, _kind, comment in relations:
        key = name(schema, table)
        tables.append(TableInfo(name=key, columns=cols.get(key, []), primary_key=pks.get(key, []),
                                foreign_keys=sorted(fks.get(key, []), key=lambda fk: (fk.columns, fk.ref_table)),
                                description=comment or None))
    tables.sort(key=lambda t: t.name)
    return SchemaSnapshot(datasource_id=datasource, engine="postgres", tables=tables, schemas=list(schemas),
                          exact_names=True)


# ---------------------------------------------------------------- values

_UTC = dt.UTC


def _value(value: Any, type_code: int | None) -> Any:
    """One Postgres value the way the file engines' values read (``datasources.values``):
    timestamptz in UTC without an offset, JSON/JSONB as canonical JSON text, arrays as lists."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(_UTC).replace(tzinfo=None)
    if isinstance(value, dt.time) and value.tzinfo is not None:
        return value.replace(tzinfo=None)
    if type_code in _JSON_TYPES and not isinstance(value, str):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return value


#: the type oids of json and jsonb
_JSON_TYPES = frozenset({114, 3802})


def normalise_postgres(rows: list[Any], types: list[int]) -> list[list[Any]]:
    """Rows with Postgres's own kinds turned into the file engines' (the rest is ``normalise_rows``'s)."""
    plain = (int, float, str, bool, Decimal, type(None))
    return [[v if type(v) in plain else _value(v, types[i] if i < len(types) else None) for i, v in enumerate(row)]
            for row in rows]


# ---------------------------------------------------------------- the engine

#: Functions a statement may call, written as SQL: what data questions need (aggregates, windows,
#: strings, numbers, dates, casts, conditionals, JSON reads). The canonical names the final-SQL check
#: and the server statement check compare with are read off this text
#: (``guard.allowed_function_names``); anything else (server files, sessions, settings, advisory
#: locks, large objects, dblink, query_to_xml, sequences) is refused.
ALLOWED_CALLS = """
SELECT COUNT(x), COUNT(DISTINCT x), SUM(x), AVG(x), MIN(x), MAX(x), STRING_AGG(s, ','), ARRAY_AGG(x),
  BOOL_AND(b), BOOL_OR(b), EVERY(b), STDDEV(x), STDDEV_POP(x), STDDEV_SAMP(x), VARIANCE(x), VAR_POP(x),
  VAR_SAMP(x), CORR(a, b), COVAR_POP(a, b), COVAR_SAMP(a, b), REGR_SLOPE(a, b), REGR_INTERCEPT(a, b),
  PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY x), PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY x),
  MODE() WITHIN GROUP (ORDER BY x), COUNT(*) FILTER (WHERE b),
  ROW_NUMBER() OVER (), RANK() OVER (), DENSE_RANK() OVER (), PERCENT_RANK() OVER (), CUME_DIST() OVER (),
  NTILE(2) OVER (), LAG(x) OVER (), LEAD(x) OVER (), FIRST_VALUE(x) OVER (), LAST_VALUE(x) OVER (),
  NTH_VALUE(x, 2) OVER (),
  COALESCE(a, b), NULLIF(a, b), GREATEST(a, b), LEAST(a, b), CASE WHEN a THEN b ELSE c END,
  LENGTH(s), CHAR_LENGTH(s), CHARACTER_LENGTH(s), OCTET_LENGTH(s), LOWER(s), UPPER(s), INITCAP(s),
  SUBSTR(s, 1, 2), SUBSTRING(s, 1, 2), SUBSTRING(s FROM 1 FOR 2), TRIM(s), BTRIM(s), LTRIM(s), RTRIM(s),
  REPLACE(s, 'a', 'b'), POSITION('a' IN s), STRPOS(s, 'a'), LEFT(s, 2), RIGHT(s, 2), LPAD(s, 3, '0'),
  RPAD(s, 3, '0'), CONCAT(a, b), CONCAT_WS(',', a, b), SPLIT_PART(s, ',', 1), REVERSE(s), REPEAT(s, 2),
  FORMAT('%s', s), TO_CHAR(d, 'YYYY-MM'), REGEXP_REPLACE(s, 'a', 'b'), REGEXP_MATCH(s, 'a'),
  STARTS_WITH(s, 'a'), ASCII(s), CHR(65), MD5(s), TRANSLATE(s, 'a', 'b'),
  ABS(x), ROUND(x), ROUND(x, 2), CEIL(x), CEILING(x), FLOOR(x), TRUNC(x), TRUNC(x, 2), SIGN(x), SQRT(x),
  CBRT(x), POWER(x, 2), EXP(x), LN(x), LOG(x), LOG(10, x), LOG10(x), MOD(a, b), PI(), DIV(a, b),
  WIDTH_BUCKET(x, 0, 10, 5), TO_NUMBER(s, '999'), DEGREES(x), RADIANS(x), RANDOM(),
  NOW(), CURRENT_DATE, CURRENT_TIMESTAMP, CURRENT_TIME, LOCALTIME, LOCALTIMESTAMP, DATE_TRUNC('month', d),
  DATE_PART('year', d), EXTRACT(YEAR FROM d), AGE(d), AGE(a, b), MAKE_DATE(2020, 1, 1),
  MAKE_TIMESTAMP(2020, 1, 1, 0, 0, 0), MAKE_INTERVAL(days => 1), TO_DATE(s, 'YYYY-MM-DD'),
  TO_TIMESTAMP(s, 'YYYY-MM-DD'), TO_TIMESTAMP(1), JUSTIFY_DAYS(i), JUSTIFY_HOURS(i), ISFINITE(d),
  d + INTERVAL '1 day', CAST(x AS TEXT), x::numeric, DATE '2020-01-01',
  ARRAY_LENGTH(a, 1), CARDINALITY(a), ARRAY_POSITION(a, 1), ARRAY_TO_STRING(a, ','), UNNEST(a),
  JSON_EXTRACT_PATH_TEXT(j, 'a'), JSONB_EXTRACT_PATH_TEXT(j, 'a'), j -> 'a', j ->> 'a', j #>> '{a}',
  JSON_ARRAY_LENGTH(j), JSONB_ARRAY_LENGTH(j), JSON_TYPEOF(j), JSONB_TYPEOF(j), TO_JSON(x), TO_JSONB(x),
  JSON_AGG(x), JSONB_AGG(x), JSON_BUILD_OBJECT('a', x), JSONB_BUILD_OBJECT('a', x), ROW_TO_JSON(x)
FROM t, GENERATE_SERIES(1, 3) AS g(n)
WHERE (a AND b OR NOT c) AND x IN (1, 2) AND x BETWEEN 1 AND 2 AND s LIKE 'a%' AND s ILIKE 'a%' AND x IS NULL
  AND EXISTS (SELECT 1) AND x = ANY (ARRAY[1, 2]) AND x <> ALL (ARRAY[1]) AND s SIMILAR TO 'a' AND s ~ 'a'
  AND x IS DISTINCT FROM y AND COALESCE(a, b) = 1
"""


class PostgresEngine(DatabaseEngine):
    """Postgres, reached by URL (``postgresql://user@host:port/db``), its password in the environment."""

    name = "postgres"
    label = "Postgres"
    dialect = "postgres"
    server = True
    url_schemes = ("postgresql", "postgres")
    system_schemas = frozenset({"pg_catalog", "information_schema", "pg_toast", "pg_temp"})
    system_prefixes = ("pg_",)
    system_functions = frozenset({"current_setting", "set_config", "version", "inet_server_addr",
                                  "inet_server_port", "inet_client_addr", "current_user", "session_user",
                                  "current_database", "current_schema", "current_schemas", "txid_current",
                                  "has_table_privilege", "has_schema_privilege", "has_database_privilege"})
    dangerous_functions = ("pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "lo_import",
                           "lo_export", "lo_get", "lo_put", "lo_open", "pg_terminate_backend", "pg_cancel_backend",
                           "set_config", "pg_advisory_lock", "pg_advisory_xact_lock", "pg_try_advisory_lock",
                           "dblink", "dblink_exec", "query_to_xml", "table_to_xml", "cursor_to_xml",
                           "query_to_xml_and_xmlschema", "pg_sleep", "pg_sleep_for", "pg_sleep_until",
                           "pg_reload_conf", "pg_rotate_logfile", "pg_notify", "pg_logical_emit_message",
                           "pg_switch_wal", "pg_create_restore_point", "txid_current", "nextval", "setval",
                           "currval", "lastval", "pg_export_snapshot")
    allowed_calls = ALLOWED_CALLS
    own_schemas = frozenset({""})
    folds_to_lower = True
    sql_style = SqlStyle(
        like="ILIKE", string_agg="STRING_AGG", integer_division=True,
        # real is NUMERIC: Postgres rounds only NUMERIC to a number of places (ROUND(x, 2))
        cast_types={"integer": "INTEGER", "real": "NUMERIC", "text": "TEXT"},
        date_parts={"year": "CAST(EXTRACT(YEAR FROM {}) AS INTEGER)",
                    "month": "CAST(EXTRACT(MONTH FROM {}) AS INTEGER)",
                    "day": "CAST(EXTRACT(DAY FROM {}) AS INTEGER)",
                    "year_month": "TO_CHAR({}, 'YYYY-MM')", "date": "TO_CHAR({}, 'YYYY-MM-DD')"})

    def open(self, cfg: DatasourceConfig, *, bulk: bool = False) -> PostgresAdapter:
        return PostgresAdapter(cfg, bulk=bulk)

    def namespaced(self, cfg: DatasourceConfig, namespace: str) -> DatasourceConfig:
        return cfg.model_copy(update={"schemas": [namespace.lower()]})

    def write_tables(self, cfg: DatasourceConfig, namespace: str, tables: list[TableData], source_dialect: str,
                     *, replace: bool = False) -> None:
        """Tables and their names folded to lower case, as Postgres ports of a database are (the
        source's unquoted SQL then reaches them), in schema ``namespace``; rows in batches, foreign
        keys once every row is in; one transaction, so a failed copy leaves nothing behind."""
        from psycopg2.extras import execute_values

        pg = _driver()
        a = ServerAddress.of(cfg, ("postgresql", "postgres"), 5432)
        where = a.where("Postgres", cfg.id)
        schema = namespace.lower()
        try:
            conn = pg.connect(host=a.host, port=a.port, user=a.user, password=a.password, dbname=a.database,
                              connect_timeout=CONNECT_TIMEOUT_S, application_name="nl2sql-assets-load")
        except pg.OperationalError as exc:
            raise DatasourceUnavailable(f"{where}: cannot connect: {_first_line(exc)}") from None
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
                if cur.fetchone() is not None:
                    if not replace:
                        raise DatasourceError(f"{where}: schema {schema} exists already; pass --force to replace it")
                    cur.execute(f"DROP SCHEMA {_quote(schema)} CASCADE")
                cur.execute(f"CREATE SCHEMA {_quote(schema)}")
                for table in tables:
                    name = f"{_quote(schema)}.{_quote(table.name.lower())}"
                    columns = [f"{_quote(c.lower())} {_server_type(t, source_dialect, 'postgres')}"
                               + (" NOT NULL" if not_null else "") for c, t, not_null in table.columns]
                    if table.primary_key:
                        columns.append(f"PRIMARY KEY ({', '.join(_quote(k.lower()) for k in table.primary_key)})")
                    cur.execute(f"CREATE TABLE {name} ({', '.join(columns)})")
                    if table.description:
                        cur.execute(f"COMMENT ON TABLE {name} IS %s", (table.description,))
                    if table.rows:
                        execute_values(cur, f"INSERT INTO {name} VALUES %s", table.rows, page_size=1000)
                for table in tables:
                    for column, (parent, parent_column) in table.references.items():
                        cur.execute(f"ALTER TABLE {_quote(schema)}.{_quote(table.name.lower())} ADD FOREIGN KEY "
                                    f"({_quote(column.lower())}) REFERENCES {_quote(schema)}.{_quote(parent.lower())} "
                                    f"({_quote(parent_column.lower())})")
            conn.commit()
        except pg.Error as exc:
            conn.rollback()
            raise DatasourceError(f"{where}: cannot copy the tables into schema {schema}: {_first_line(exc)}") from None
        finally:
            conn.close()

    def where(self, cfg: DatasourceConfig) -> str:
        return ServerAddress.of(cfg, ("postgresql", "postgres"), 5432).where("Postgres", cfg.id)

    def identity(self, cfg: DatasourceConfig) -> dict[str, Any]:
        address = ServerAddress.of(cfg, ("postgresql", "postgres"), 5432)
        return {"host": address.host, "port": address.port, "database": address.database,
                "schemas": list(cfg.schemas)}


ENGINE = PostgresEngine()
