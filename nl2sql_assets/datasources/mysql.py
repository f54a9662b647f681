"""The MySQL / MariaDB engine: read-only and bounded by the server's own rules, through PyMySQL.

Every statement runs alone in ``START TRANSACTION READ ONLY``, which is rolled back whatever
happens, with its settings pinned for that statement alone: on MariaDB ``SET STATEMENT
max_statement_time=..., sql_mode=... FOR <statement>``; on MySQL the session's
``max_execution_time`` and ``sql_mode`` set again right before it. ``sql_mode`` is the server's
own without ``ANSI_QUOTES``, ``NO_BACKSLASH_ESCAPES`` and ``PIPES_AS_CONCAT``, so the server
reads quotes, backslashes and ``||`` as the statement guard does. The client never enables
multi-statements, so the server itself refuses a second statement.

Rows come through an unbuffered (server-side) cursor and are cut at the row limit and one more;
a result longer than that is abandoned by closing the connection (the pool makes a new one), so a
12-million-row result costs no more memory than the limit. At the timeout (and half a second) the
client kills the statement from a second connection (``KILL QUERY``) should the server not have.

What a read-only transaction does not stop (``SELECT ... INTO OUTFILE``, ``LOAD_FILE``, ``SLEEP``,
``GET_LOCK``, executable comments ``/*! ... */``) is refused before the statement is sent: by the
statement guard and by the server statement check (``guard.check_server_statement``).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
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
#: sql_mode flags that change how the server reads a statement's text
_TEXT_MODES = ("ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT", "ANSI")
# Server error codes.
_TIMEOUT_CODES = frozenset({1969, 3024, 1317, 1028})  # max_statement_time, max_execution_time, killed, sort aborted
_READ_ONLY_CODES = frozenset({1792, 1142, 1044, 1227, 1290})  # read-only transaction, denied, --secure-file-priv
_UNREACHABLE_CODES = frozenset({2002, 2003, 2005, 2006, 2013, 2055, 1040, 1045, 1049, 1130, 1129})
# Field types (pymysql.constants.FIELD_TYPE)
_TIME, _BIT, _JSON = 11, 16, 245


def _driver() -> Any:
    try:
        import pymysql
        import pymysql.cursors
    except ImportError:
        raise DatasourceError("the MySQL driver PyMySQL is not installed: pip install pymysql") from None
    return pymysql


class MysqlAdapter:
    """Read-only access to the tables of one MySQL or MariaDB database."""

    engine = "mysql"
    dialect = "mysql"

    def __init__(self, cfg: DatasourceConfig, *, bulk: bool = False) -> None:
        self.id = cfg.id
        self.row_limit = cfg.row_limit
        self.timeout_s = cfg.timeout_s
        self.address = ServerAddress.of(cfg, ("mysql", "mariadb"), 3306)
        self.database = cfg.database or self.address.database
        self.where = self.address.where("MySQL", cfg.id, self.database)
        if not self.database:
            raise DatasourceError(f"{self.where}: no database: name it in the URL (mysql://user@host:port/DATABASE) "
                                  "or with database: in nl2sql.yaml")
        self._my = _driver()
        self._pool: ConnectionPool[Any] = ConnectionPool(self._connect, lambda c: c.close(), cfg.pool_size)
        self._killer: Any = None
        self._killer_lock = threading.Lock()
        self.mariadb = False
        self._sql_mode = ""
        with self._pool.connection() as held:  # the first connection: reachable, logged in, the database there
            self._settle(held.conn)

    # ------------------------------------------------------------ connections

    def _open(self) -> Any:
        a = self.address
        try:
            return self._my.connect(host=a.host, port=a.port, user=a.user or "", password=a.password or "",
                                    database=self.database, connect_timeout=CONNECT_TIMEOUT_S, charset="utf8mb4",
                                    autocommit=False, client_flag=0)
        except self._my.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            hint = (f"no database {self.database!r} on the server" if code == 1049 else
                    "check that the server runs and accepts this user from here (the URL in url_env)")
            raise DatasourceUnavailable(f"{self.where}: cannot connect: {_message(exc)}; {hint}") from None

    def _connect(self) -> Any:
        conn = self._open()
        if self._sql_mode:
            self._session(conn)
        return conn

    def _settle(self, conn: Any) -> None:
        """The server's flavour and the sql_mode every statement is pinned to."""
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@GLOBAL.sql_mode")
            version, mode = cur.fetchone()
        self.mariadb = "mariadb" in str(version).lower()
        self.version = str(version)
        kept = [m for m in str(mode or "").split(",") if m and m.upper() not in _TEXT_MODES]
        self._sql_mode = ",".join(kept)
        self._session(conn)

    def _session(self, conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = %s", (self._sql_mode,))
            cur.execute("SET SESSION TRANSACTION READ ONLY")
        conn.commit()

    def _kill(self, thread_id: int) -> None:
        """Stop the statement running on connection ``thread_id``, from a connection of its own."""
        with self._killer_lock:
            try:
                if self._killer is None:
                    self._killer = self._open()
                with self._killer.cursor() as cur:
                    cur.execute(f"KILL QUERY {int(thread_id)}")
            except Exception:
                if self._killer is not None:
                    self._killer.close()
                self._killer = None

    # ------------------------------------------------------------ statements

    def _wrapped(self, statement: str, timeout: float) -> str:
        if self.mariadb:
            mode = self._sql_mode.replace("'", "")
            return f"SET STATEMENT max_statement_time={timeout:.3f}, sql_mode='{mode}' FOR {statement}"
        return statement

    def execute(self, sql: str, *, row_limit: int | None = None, timeout_s: float | None = None) -> QueryOutput:
        statement = check_server_statement(sql, ENGINE)
        limit = row_limit if row_limit is not None else self.row_limit
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        my = self._my
        with self._pool.connection() as held:
            conn = held.conn
            started = time.monotonic()
            watchdog = Watchdog(lambda: self._kill(conn.thread_id()), timeout + CLIENT_GRACE_S)
            cursor = None
            try:
                with conn.cursor() as setup:
                    setup.execute("START TRANSACTION READ ONLY")
                    if not self.mariadb:
                        setup.execute("SET SESSION max_execution_time = %s, sql_mode = %s",
                                      (max(1, int(timeout * 1000)), self._sql_mode))
                cursor = conn.cursor(my.cursors.SSCursor)
                with watchdog:
                    cursor.execute(self._wrapped(statement, timeout))
                    rows = list(cursor.fetchmany(limit + 1))
                    description = cursor.description or ()
                if len(rows) > limit:  # the rest is never read: the statement is stopped, not drained
                    self._kill(conn.thread_id())
                columns = [d[0] for d in description]
                types = [d[1] for d in description]
            except my.err.MySQLError as exc:
                code = exc.args[0] if exc.args else None
                if code in _TIMEOUT_CODES or watchdog.fired.is_set():
                    held.broken = held.broken or watchdog.fired.is_set()
                    raise QueryTimeout(f"{self.where}: the query ran past its {timeout:g} s timeout") from None
                if code in _READ_ONLY_CODES:
                    raise ReadOnlyViolation(f"{self.where}: the database refused the statement: {_message(exc)}") \
                        from None
                if code in _UNREACHABLE_CODES or isinstance(exc, my.err.InterfaceError):
                    held.broken = True
                    raise DatasourceUnavailable(f"{self.where}: the connection failed: {_message(exc)}") from None
                raise QueryFailed(f"{self.where}: {_message(exc)}") from None
            finally:
                try:
                    if cursor is not None:
                        cursor.close()  # reads what is left of a stopped statement: its end, or its error
                    conn.rollback()
                except (my.err.MySQLError, OSError, AttributeError):
                    held.broken = True  # the pool closes it: the server ends anything left with the connection
            return QueryOutput.from_fetch(columns, normalise_mysql(rows, types), limit, started)

    # ------------------------------------------------------------ the catalog

    def introspect(self) -> SchemaSnapshot:
        with self._pool.connection() as held:
            conn = held.conn
            try:
                with conn.cursor() as cur:
                    cur.execute(_RELATIONS, (self.database,))
                    relations = cur.fetchall()
                    cur.execute(_COLUMNS, (self.database,))
                    columns = cur.fetchall()
                    cur.execute(_FOREIGN_KEYS, (self.database,))
                    foreign = cur.fetchall()
            except self._my.err.MySQLError as exc:
                raise DatasourceError(f"{self.where}: cannot read the catalog: {_message(exc)}") from None
            finally:
                conn.rollback()
        return _snapshot(self.id, relations, columns, foreign)

    def statement_reads(self, sql: str) -> tuple[str | None, frozenset[tuple[str, str]] | None]:
        """The server's own word on ``sql``, which it never runs: ``(error, None)`` when it cannot
        prepare it (``EXPLAIN``, in a read-only transaction), else ``(None, None)``: MySQL's and
        MariaDB's plans name the tables a statement reads, not the columns."""
        try:
            statement = check_server_statement(sql, ENGINE)
        except DatasourceError:
            return None, None  # the policy check's own rules refuse it
        my = self._my
        with self._pool.connection() as held:
            conn = held.conn
            try:
                with conn.cursor() as cur:
                    cur.execute("START TRANSACTION READ ONLY")
                    cur.execute("EXPLAIN " + self._wrapped(statement, self.timeout_s) if not self.mariadb
                                else self._wrapped("EXPLAIN " + statement, self.timeout_s))
                    cur.fetchall()
            except my.err.MySQLError as exc:
                code = exc.args[0] if exc.args else None
                if code in _UNREACHABLE_CODES or isinstance(exc, my.err.InterfaceError):
                    held.broken = True
                    return None, None
                return _message(exc), None
            finally:
                try:
                    conn.rollback()
                except my.err.MySQLError:
                    held.broken = True
        return None, None

    def could_write(self) -> str | None:
        """Why the connecting user could change data (a write or file privilege), or None."""
        with self._pool.connection() as held:
            conn = held.conn
            try:
                with conn.cursor() as cur:
                    cur.execute("SHOW GRANTS")
                    grants = [str(r[0]) for r in cur.fetchall()]
            finally:
                conn.rollback()
        risky = ("ALL PRIVILEGES", "INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER", "FILE", "SUPER")
        found = sorted({word for grant in grants for word in risky if word in grant.upper().split(" ON ")[0]})
        if found:
            return f"user {self.address.user} holds {', '.join(found)}"
        return None

    def close(self) -> None:
        self._pool.close()
        self._pool.reopen()
        with self._killer_lock:
            if self._killer is not None:
                self._killer.close()
            self._killer = None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _mysql_type(source_type: str, source_dialect: str, key: bool) -> str:
    """A column type written in ``source_dialect`` as MySQL writes it: text without a length is
    TEXT, or VARCHAR(255) where a key needs a length."""
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        built = exp.DataType.build(source_type or "TEXT", dialect=source_dialect)
    except (SqlglotError, ValueError):
        return "VARCHAR(255)" if key else "TEXT"
    if built.is_type(*exp.DataType.TEXT_TYPES) and not built.expressions:
        return "VARCHAR(255)" if key else "TEXT"
    return built.sql(dialect="mysql")


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2:
        return f"({args[0]}) {args[1]}"
    return str(exc) or type(exc).__name__


_RELATIONS = """
SELECT TABLE_NAME, TABLE_TYPE, TABLE_COMMENT FROM information_schema.TABLES
WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME
"""
_COLUMNS = """
SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, COLUMN_COMMENT
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME, ORDINAL_POSITION
"""
_FOREIGN_KEYS = """
SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME,
       k.CONSTRAINT_NAME = 'PRIMARY'
FROM information_schema.KEY_COLUMN_USAGE k
WHERE k.TABLE_SCHEMA = %s AND (k.REFERENCED_TABLE_NAME IS NOT NULL OR k.CONSTRAINT_NAME = 'PRIMARY')
ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION
"""


def _snapshot(datasource: str, relations: Any, columns: Any, keys: Any) -> SchemaSnapshot:
    pks: dict[str, list[str]] = {}
    fks: dict[tuple[str, str], tuple[list[str], str, list[str]]] = {}
    for table, constraint, column, ref_table, ref_column, primary in keys:
        if primary:
            pks.setdefault(table, []).append(column)
        else:
            entry = fks.setdefault((table, constraint), ([], ref_table, []))
            entry[0].append(column)
            entry[2].append(ref_column)
    cols: dict[str, list[ColumnInfo]] = {}
    for table, column, typ, nullable, _key, comment in columns:
        primary = column in pks.get(table, [])
        cols.setdefault(table, []).append(ColumnInfo(name=column, type=str(typ).upper(),
                                                     nullable=nullable == "YES" and not primary, primary_key=primary,
                                                     description=comment or None))
    tables = []
    for table, _kind, comment in relations:
        foreign = sorted((ForeignKey(columns=c, ref_table=r, ref_columns=rc) for (t, _), (c, r, rc) in fks.items()
                          if t == table), key=lambda fk: (fk.columns, fk.ref_table))
        tables.append(TableInfo(name=table, columns=cols.get(table, []), primary_key=pks.get(table, []),
                                foreign_keys=foreign, description=comment or None))
    return SchemaSnapshot(datasource_id=datasource, engine="mysql", tables=tables)


# ---------------------------------------------------------------- values


def _value(value: Any, type_code: int | None) -> Any:
    """One MySQL value the way the file engines' values read: TIME as ``HH:MM:SS`` (not a
    duration), BIT as a number, JSON as canonical JSON text."""
    if type_code == _TIME and isinstance(value, dt.timedelta):
        seconds = int(value.total_seconds())
        sign = "-" if seconds < 0 else ""
        seconds = abs(seconds)
        micro = value.microseconds if seconds == abs(int(value.total_seconds())) else 0
        text = f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
        return text + (f".{micro:06d}" if micro else "")
    if type_code == _BIT and isinstance(value, bytes | bytearray):
        return int.from_bytes(value, "big")
    if type_code == _JSON and isinstance(value, str | bytes):
        try:
            return json.dumps(json.loads(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except ValueError:
            return value
    return value


def normalise_mysql(rows: list[Any], types: list[int]) -> list[list[Any]]:
    """Rows with MySQL's own kinds turned into the file engines' (the rest is ``normalise_rows``'s)."""
    plain = (int, float, Decimal, type(None), dt.datetime, dt.date)
    return [[v if type(v) in plain else _value(v, types[i] if i < len(types) else None) for i, v in enumerate(row)]
            for row in rows]


# ---------------------------------------------------------------- the engine

#: Functions a statement may call, written as SQL: the canonical names the final-SQL check and
#: the server statement check compare with are read off this text (``guard.allowed_function_names``).
ALLOWED_CALLS = """
SELECT COUNT(x), COUNT(DISTINCT x), SUM(x), AVG(x), MIN(x), MAX(x), GROUP_CONCAT(x), STD(x), STDDEV(x),
  STDDEV_POP(x), STDDEV_SAMP(x), VARIANCE(x), VAR_POP(x), VAR_SAMP(x), BIT_AND(x), BIT_OR(x),
  ROW_NUMBER() OVER (), RANK() OVER (), DENSE_RANK() OVER (), PERCENT_RANK() OVER (), CUME_DIST() OVER (),
  NTILE(2) OVER (), LAG(x) OVER (), LEAD(x) OVER (), FIRST_VALUE(x) OVER (), LAST_VALUE(x) OVER (),
  NTH_VALUE(x, 2) OVER (),
  COALESCE(a, b), IFNULL(a, b), NULLIF(a, b), IF(a, b, c), CASE WHEN a THEN b ELSE c END, GREATEST(a, b),
  LEAST(a, b), ISNULL(a),
  LENGTH(s), CHAR_LENGTH(s), CHARACTER_LENGTH(s), LOWER(s), UPPER(s), LCASE(s), UCASE(s), SUBSTRING(s, 1, 2),
  SUBSTR(s, 1, 2), MID(s, 1, 2), LEFT(s, 2), RIGHT(s, 2), TRIM(s), LTRIM(s), RTRIM(s), REPLACE(s, 'a', 'b'),
  CONCAT(a, b), CONCAT_WS(',', a, b), LOCATE('a', s), INSTR(s, 'a'), POSITION('a' IN s), LPAD(s, 3, '0'),
  RPAD(s, 3, '0'), REVERSE(s), REPEAT(s, 2), SUBSTRING_INDEX(s, ',', 1), FORMAT(x, 2), ASCII(s), CHAR(65),
  REGEXP_REPLACE(s, 'a', 'b'), REGEXP_SUBSTR(s, 'a'), STRCMP(a, b), SPACE(2), HEX(s), MD5(s),
  ABS(x), ROUND(x, 2), CEIL(x), CEILING(x), FLOOR(x), TRUNCATE(x, 2), SIGN(x), SQRT(x), POWER(x, 2), POW(x, 2),
  EXP(x), LN(x), LOG(x), LOG10(x), LOG2(x), MOD(a, b), PI(), RAND(), DEGREES(x), RADIANS(x),
  NOW(), CURDATE(), CURRENT_DATE, CURRENT_TIMESTAMP, CURTIME(), DATE(d), TIME(d), YEAR(d), MONTH(d), DAY(d),
  DAYOFMONTH(d), DAYOFWEEK(d), DAYOFYEAR(d), WEEK(d), WEEKDAY(d), QUARTER(d), HOUR(d), MINUTE(d), SECOND(d),
  MONTHNAME(d), DAYNAME(d), DATE_FORMAT(d, '%Y'), STR_TO_DATE(s, '%Y'), DATEDIFF(a, b), TIMESTAMPDIFF(DAY, a, b),
  DATE_ADD(d, INTERVAL 1 DAY), DATE_SUB(d, INTERVAL 1 DAY), ADDDATE(d, 1), SUBDATE(d, 1), LAST_DAY(d),
  EXTRACT(YEAR FROM d), UNIX_TIMESTAMP(d), FROM_UNIXTIME(1), MAKEDATE(2020, 1), TIMESTAMP(d), TO_DAYS(d),
  CAST(x AS CHAR), CONVERT(x, CHAR), JSON_EXTRACT(j, '$.a'), JSON_UNQUOTE(j), JSON_LENGTH(j)
FROM t
WHERE (a AND b OR NOT c) AND x IN (1, 2) AND x BETWEEN 1 AND 2 AND s LIKE 'a%' AND x IS NULL
  AND EXISTS (SELECT 1) AND s REGEXP 'a' AND x <=> y AND (a XOR b)
"""


class MysqlEngine(DatabaseEngine):
    """MySQL and MariaDB, reached by URL (``mysql://user@host:port/db``), the password in the environment."""

    name = "mysql"
    label = "MySQL"
    dialect = "mysql"
    server = True
    url_schemes = ("mysql", "mariadb")
    system_schemas = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
    system_prefixes = ()
    system_functions = frozenset({"version", "user", "current_user", "session_user", "system_user", "database",
                                  "schema", "connection_id", "last_insert_id", "found_rows", "row_count"})
    dangerous_functions = ("load_file", "sleep", "benchmark", "get_lock", "release_lock", "release_all_locks",
                           "is_free_lock", "is_used_lock", "master_pos_wait", "source_pos_wait", "sys_exec",
                           "sys_eval", "uuid_short", "name_const")
    allowed_calls = ALLOWED_CALLS
    refused_text = ("/*!", "/*M!", "/*+")
    folds_to_lower = False
    sql_style = SqlStyle(
        like="ILIKE", string_agg="GROUP_CONCAT", integer_division=False,
        cast_types={"integer": "SIGNED", "real": "DOUBLE", "text": "CHAR"},
        date_parts={"year": "YEAR({})", "month": "MONTH({})", "day": "DAY({})",
                    "year_month": "DATE_FORMAT({}, '%Y-%m')", "date": "DATE_FORMAT({}, '%Y-%m-%d')"})

    def open(self, cfg: DatasourceConfig, *, bulk: bool = False) -> MysqlAdapter:
        return MysqlAdapter(cfg, bulk=bulk)

    def namespaced(self, cfg: DatasourceConfig, namespace: str) -> DatasourceConfig:
        return cfg.model_copy(update={"database": namespace})

    def write_tables(self, cfg: DatasourceConfig, namespace: str, tables: list[TableData], source_dialect: str,
                     *, replace: bool = False) -> None:
        """Tables under their own names in database ``namespace`` (utf8mb4, compared byte by byte
        as SQLite compares text: ``utf8mb4_bin``); rows in batches, foreign keys once every row is in.
        DDL commits as it goes in MySQL, so a failed copy drops the database it made."""
        my = _driver()
        a = ServerAddress.of(cfg, ("mysql", "mariadb"), 3306)
        where = a.where("MySQL", cfg.id)
        try:
            conn = my.connect(host=a.host, port=a.port, user=a.user or "", password=a.password or "",
                              connect_timeout=CONNECT_TIMEOUT_S, charset="utf8mb4", autocommit=True)
        except my.err.OperationalError as exc:
            raise DatasourceUnavailable(f"{where}: cannot connect: {_message(exc)}") from None
        database = _quote(namespace)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (namespace,))
                if cur.fetchone() is not None:
                    if not replace:
                        raise DatasourceError(f"{where}: database {namespace} exists already; pass --force to "
                                              "replace it")
                    cur.execute(f"DROP DATABASE {database}")
                cur.execute(f"CREATE DATABASE {database} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
                try:
                    for table in tables:
                        keys = {k.lower() for k in table.primary_key} | {c.lower() for c in table.references}
                        keys |= {pc.lower() for t in tables for p, pc in t.references.values()
                                 if p.lower() == table.name.lower()}
                        columns = [f"{_quote(c)} {_mysql_type(t, source_dialect, c.lower() in keys)}"
                                   + (" NOT NULL" if not_null else "") for c, t, not_null in table.columns]
                        if table.primary_key:
                            columns.append(f"PRIMARY KEY ({', '.join(_quote(k) for k in table.primary_key)})")
                        comment = " COMMENT = %s" if table.description else ""
                        cur.execute(f"CREATE TABLE {database}.{_quote(table.name)} ({', '.join(columns)}){comment}",
                                    (table.description,) if table.description else None)
                        marks = ", ".join(["%s"] * len(table.columns))
                        for start in range(0, len(table.rows), 1000):
                            cur.executemany(f"INSERT INTO {database}.{_quote(table.name)} VALUES ({marks})",
                                            table.rows[start:start + 1000])
                    for table in tables:
                        for column, (parent, parent_column) in table.references.items():
                            cur.execute(f"ALTER TABLE {database}.{_quote(table.name)} ADD FOREIGN KEY ({_quote(column)}) "
                                        f"REFERENCES {database}.{_quote(parent)} ({_quote(parent_column)})")
                except my.err.MySQLError:
                    cur.execute(f"DROP DATABASE IF EXISTS {database}")
                    raise
        except my.err.MySQLError as exc:
            raise DatasourceError(f"{where}: cannot copy the tables into database {namespace}: {_message(exc)}") \
                from None
        finally:
            conn.close()

    def where(self, cfg: DatasourceConfig) -> str:
        return ServerAddress.of(cfg, ("mysql", "mariadb"), 3306).where("MySQL", cfg.id, cfg.database)

    def identity(self, cfg: DatasourceConfig) -> dict[str, Any]:
        address = ServerAddress.of(cfg, ("mysql", "mariadb"), 3306)
        return {"host": address.host, "port": address.port, "database": cfg.database or address.database}


ENGINE = MysqlEngine()
