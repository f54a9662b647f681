"""How each server engine's neighbours are made: a source's catalog and a bounded sample of its
rows read, a namespace made, filled, refilled, opened and dropped (``PostgresCatalog``: a schema in
a scratch database; ``MysqlCatalog``: a database on the scratch server). ``servers`` decides where
and by whom; this module speaks to the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.neighbours.tables import (
    ROW_LIMIT,
    TIMEOUT_S,
    Column,
    Source,
    Table,
    parents_first,
)

#: what every namespace this project makes is called at its start (``prune`` looks for it)
PREFIX = "nl2sql_nb_"
#: rows an INSERT statement carries at once
BATCH = 500
#: a table estimated to hold more than this many times the rows a neighbour may copy is sampled
#: across its whole extent (Postgres TABLESAMPLE SYSTEM, MySQL slices of its integer key), not
#: read from its start
SPREAD = 4


class ServerCatalog:
    """How one server engine's source is read and a namespace made, filled, opened and dropped."""

    engine: ClassVar[str]
    quote: ClassVar[str]
    #: how a handle file of this engine's neighbours is named at its end
    handle_suffix: ClassVar[str]

    def connect(self, config: DatasourceConfig, database: str | None = None) -> Any:
        raise NotImplementedError

    def read(self, config: DatasourceConfig, namespace: str | None, max_rows: int | None) -> Source:
        raise NotImplementedError

    def make(self, config: DatasourceConfig, namespace: str, source: Source,
             rows: Mapping[str, Sequence[tuple[Any, ...]]], grantee: str | None = None) -> None:
        """Make ``namespace`` with the source's definitions and ``rows`` (as the builder,
        ``config``); ``grantee`` may then read it and nothing more."""
        raise NotImplementedError

    def account(self, config: DatasourceConfig) -> str:
        """The account ``config`` logs in as, spelt as a GRANT names it."""
        raise NotImplementedError

    def allow_reading(self, builder: DatasourceConfig, grantee: str) -> None:
        """What ``grantee`` needs, granted once, before any namespace is made (nothing, where
        ``make`` grants per namespace)."""
        return None

    def refill(self, config: DatasourceConfig, namespace: str, source: Source,
               rows: Mapping[str, Sequence[tuple[Any, ...]]], conn: Any = None) -> None:
        """``namespace``'s tables emptied and filled with ``rows``, on ``conn`` where given (a
        connection of the builder's to ``namespace``, ``connect_to``; kept by the caller), else on
        one of its own."""
        raise NotImplementedError

    def connect_to(self, config: DatasourceConfig, namespace: str) -> Any:
        """A builder's connection for ``refill`` of ``namespace``, to keep between refills."""
        return self.connect(config)

    def drop(self, config: DatasourceConfig, namespace: str) -> None:
        raise NotImplementedError

    def namespaces(self, config: DatasourceConfig) -> list[str]:
        """Every namespace of the scratch place this module made (``PREFIX``)."""
        raise NotImplementedError

    def open(self, config: DatasourceConfig, namespace: str | None, timeout_s: float = TIMEOUT_S) -> Any:
        from nl2sql_assets.datasources.engines import engine_of

        cfg = config.model_copy(update={"id": "neighbour", "row_limit": ROW_LIMIT, "timeout_s": timeout_s})
        if namespace is not None:
            cfg = self.namespaced(cfg, namespace)
        return engine_of(cfg.engine).open(cfg, bulk=True)

    def namespaced(self, config: DatasourceConfig, namespace: str) -> DatasourceConfig:
        raise NotImplementedError

    def q(self, name: str) -> str:
        return self.quote + name.replace(self.quote, self.quote * 2) + self.quote

    def keyed(self, cur: Any, select: str, table: Table, max_rows: int) -> list[tuple[Any, ...]] | None:
        """``max_rows`` rows in ``SPREAD`` slices spread over the range of the table's one integer
        key (``select ... WHERE key >= start ORDER BY key LIMIT n``: each an index range read, the
        same rows each time); None where the table has no such key."""
        keys = [c for c in table.columns if c.primary_key]
        if len(keys) != 1 or not keys[0].integer:
            return None
        key = self.q(keys[0].name)
        cur.execute(f"SELECT MIN({key}), MAX({key}) FROM ({select}) AS nl2sql_whole")
        low, high = cur.fetchone()
        if not (isinstance(low, int) and isinstance(high, int)):
            return None
        index = table.index(keys[0].name)
        per = -(-max_rows // SPREAD)
        rows: dict[Any, tuple[Any, ...]] = {}
        for n in range(SPREAD):
            start = low + (high - low) * n // SPREAD
            cur.execute(f"{select} WHERE {key} >= %s ORDER BY {key} LIMIT {per}", (start,))
            for row in cur.fetchall():
                rows.setdefault(row[index], tuple(row))
        return list(rows.values())[:max_rows]

    def insert(self, cur: Any, savepoint: Any, table: Table, rows: Sequence[tuple[Any, ...]],
               qualified: str) -> None:
        """``rows`` into ``qualified``, each one the database refuses left out: a batch at a time
        under a savepoint, a refused batch split in halves."""
        if not rows:
            return
        marks = "(" + ", ".join(["%s"] * len(table.columns)) + ")"
        for start in range(0, len(rows), BATCH):
            batch = [self.value_row(r) for r in rows[start:start + BATCH]]
            self._insert(cur, savepoint, qualified, marks, batch)

    def _insert(self, cur: Any, savepoint: Any, qualified: str, marks: str, rows: list[tuple[Any, ...]]) -> None:
        savepoint(cur, "SAVEPOINT nl2sql_batch")
        try:
            cur.execute(f"INSERT INTO {qualified} VALUES {', '.join([marks] * len(rows))}",
                        [v for row in rows for v in row])
        except self.refused() as exc:
            savepoint(cur, "ROLLBACK TO SAVEPOINT nl2sql_batch")
            if len(rows) > 1:
                middle = len(rows) // 2
                self._insert(cur, savepoint, qualified, marks, rows[:middle])
                self._insert(cur, savepoint, qualified, marks, rows[middle:])
            del exc
            return
        savepoint(cur, "RELEASE SAVEPOINT nl2sql_batch")

    def refused(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def value_row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(row)


class PostgresCatalog(ServerCatalog):
    engine = "postgres"
    quote = '"'
    handle_suffix = ".pg.json"

    def _pg(self) -> Any:
        from nl2sql_assets.datasources.postgres import _driver

        return _driver()

    def connect(self, config: DatasourceConfig, database: str | None = None) -> Any:
        from nl2sql_assets.datasources.base import DatasourceUnavailable
        from nl2sql_assets.datasources.postgres import CONNECT_TIMEOUT_S
        from nl2sql_assets.datasources.server import ServerAddress

        pg = self._pg()
        a = ServerAddress.of(config, ("postgresql", "postgres"), 5432)
        dbname = database or config.database or a.database
        try:
            conn = pg.connect(host=a.host, port=a.port, user=a.user, password=a.password, dbname=dbname,
                              connect_timeout=CONNECT_TIMEOUT_S, application_name="nl2sql-assets-neighbours")
        except pg.OperationalError as exc:
            from nl2sql_assets.datasources.postgres import _first_line

            raise DatasourceUnavailable(f"{a.where('Postgres', config.id, dbname)}: cannot connect: "
                                        f"{_first_line(exc)}") from None
        conn.autocommit = True
        return conn

    def namespaced(self, config: DatasourceConfig, namespace: str) -> DatasourceConfig:
        return config.model_copy(update={"schemas": [namespace]})

    def refused(self) -> tuple[type[BaseException], ...]:
        pg = self._pg()
        return (pg.IntegrityError, pg.DataError, pg.errors.DatatypeMismatch)

    def value_row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        from psycopg2.extras import Json

        return tuple(Json(v) if isinstance(v, dict) else v for v in row)

    def read(self, config: DatasourceConfig, namespace: str | None, max_rows: int | None) -> Source:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                if namespace is not None:
                    schema = namespace
                elif config.schemas:
                    if len(config.schemas) > 1:
                        raise UserError(f"datasource {config.id!r}: neighbour databases are made of one schema; "
                                        f"this one reads {', '.join(config.schemas)} (give it one, or grade on "
                                        "the original only with --no-neighbours)")
                    schema = config.schemas[0]
                else:
                    cur.execute("SELECT current_schema()")
                    schema = cur.fetchone()[0]
                cur.execute("BEGIN READ ONLY")
                cur.execute("SELECT set_config('search_path', %s, true)", (self.q(schema),))
                return self._read(cur, schema, max_rows)
        finally:
            conn.close()

    def _read(self, cur: Any, schema: str, max_rows: int | None) -> Source:
        cur.execute("SELECT c.oid, c.relname, c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = "
                    "c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
                    "ORDER BY c.relname", (schema,))
        relations = cur.fetchall()
        tables: dict[str, Table] = {}
        types: dict[str, str] = {}
        constraints: list[str] = []
        indexes: list[str] = []
        for oid, name, estimate in relations:
            cur.execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, t.typtype, t.oid, t.typname, "
                "format_type(t.typbasetype, t.typtypmod), a.attgenerated <> '' "
                "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", (oid,))
            columns = []
            parts = []
            for attname, type_text, not_null, typtype, type_oid, typname, base, generated in cur.fetchall():
                if typtype == "e":  # an enum: made again in the neighbour's schema, named there
                    cur.execute("SELECT enumlabel FROM pg_enum WHERE enumtypid = %s ORDER BY enumsortorder",
                                (type_oid,))
                    labels = ", ".join("'" + r[0].replace("'", "''") + "'" for r in cur.fetchall())
                    types[typname] = f"CREATE TYPE {self.q(typname)} AS ENUM ({labels})"
                    type_text = self.q(typname)
                elif typtype == "d":  # a domain: its base type (its own CHECK is not copied)
                    type_text = base
                if generated:
                    continue  # a generated column takes no value of its own: left out of the copy
                columns.append(Column(attname, type_text, bool(not_null), False))
                parts.append(f"{self.q(attname)} {type_text}" + (" NOT NULL" if not_null else ""))
            cur.execute("SELECT contype, pg_get_constraintdef(oid, true), conname, "
                        "ARRAY(SELECT a.attname FROM unnest(conkey) u(n) JOIN pg_attribute a ON a.attrelid = conrelid "
                        "AND a.attnum = u.n), confrelid::regclass::text, "
                        "ARRAY(SELECT a.attname FROM unnest(confkey) u(n) JOIN pg_attribute a ON a.attrelid = confrelid "
                        "AND a.attnum = u.n) FROM pg_constraint WHERE conrelid = %s ORDER BY contype, conname", (oid,))
            table = Table(name, "", columns, quote='"')
            for contype, definition, conname, keys, parent, parent_keys in cur.fetchall():
                if contype == "p":
                    for column in columns:
                        column.primary_key = column.name in keys
                    parts.append(definition)
                elif contype in ("u", "c"):
                    parts.append(definition)
                    if contype == "c":
                        for column in columns:
                            column.checked = column.checked or column.name in keys
                elif contype == "f":
                    if "." in parent.replace('"', ""):
                        raise UserError(f"table {schema}.{name} refers to {parent}, in another schema: neighbour "
                                        "databases are made of one schema's tables")
                    constraints.append(f"ALTER TABLE {self.q(name)} ADD CONSTRAINT {self.q(conname)} {definition}")
                    if len(keys) == 1 and len(parent_keys) == 1:
                        table.references[keys[0]] = (parent.strip('"'), parent_keys[0])
            table.create_sql = f"CREATE TABLE {self.q(name)} ({', '.join(parts)})"
            cur.execute("SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = %s AND i.indisunique "
                        "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)", (oid,))
            indexes += [r[0].replace(f" ON {self.q(schema)}.", " ON ").replace(f" ON {schema}.", " ON ")
                        for r in cur.fetchall()]
            names = ", ".join(self.q(c.name) for c in columns)
            table.rows = self._sample(cur, f"SELECT {names} FROM {self.q(schema)}.{self.q(name)}", table,
                                      estimate, max_rows)
            tables[name] = table
        cur.execute("SELECT c.relname, pg_get_viewdef(c.oid, true) FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'v' ORDER BY c.relname", (schema,))
        views = [f"CREATE VIEW {self.q(v)} AS {d}" for v, d in cur.fetchall()]
        return Source(parents_first(tables), indexes=indexes, views=views, types=list(types.values()),
                      constraints=constraints)

    def _sample(self, cur: Any, select: str, table: Table, estimate: float,
                max_rows: int | None) -> list[tuple[Any, ...]]:
        """At most ``max_rows`` of a table's rows. Where the planner's estimate says it is large:
        slices over its integer key (``keyed``), else pages drawn across the whole table
        (``TABLESAMPLE SYSTEM``, the same pages each time); else from its start. Never a full scan."""
        if max_rows is None:
            cur.execute(select)
            return [tuple(r) for r in cur.fetchall()]
        if estimate > SPREAD * max_rows:
            rows = self.keyed(cur, select, table, max_rows)
            if not rows:
                percent = min(100.0, 100.0 * SPREAD * max_rows / estimate)
                cur.execute(f"{select} TABLESAMPLE SYSTEM ({percent:.6f}) REPEATABLE (0) "
                            f"LIMIT {2 * SPREAD * int(max_rows)}")
                rows = [tuple(r) for r in cur.fetchall()]
                rows = rows[::max(1, len(rows) // max_rows)][:max_rows]  # every n-th: all the pages drawn
            if rows:
                return rows
        cur.execute(f"{select} LIMIT {int(max_rows)}")
        return [tuple(r) for r in cur.fetchall()]

    @contextlib.contextmanager
    def _in(self, config: DatasourceConfig, namespace: str) -> Iterator[Any]:
        conn = self.connect(config)
        try:
            with self._on(conn, namespace) as cur:
                yield cur
        finally:
            conn.close()

    @contextlib.contextmanager
    def _on(self, conn: Any, namespace: str) -> Iterator[Any]:
        """One transaction on ``conn`` (autocommit: the transaction is ours), ``namespace`` first on
        its search path; rolled back where anything fails."""
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            try:
                cur.execute(f"SET LOCAL search_path TO {self.q(namespace)}")
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    cur.execute("ROLLBACK")
                raise

    def make(self, config: DatasourceConfig, namespace: str, source: Source,
             rows: Mapping[str, Sequence[tuple[Any, ...]]], grantee: str | None = None) -> None:
        ensure_scratch_database(config)
        try:
            self._make(config, namespace, source, rows, grantee)
        except self._pg().errors.InsufficientPrivilege as exc:
            from nl2sql_assets.datasources.server import ServerAddress

            address = ServerAddress.of(config, ("postgresql", "postgres"), 5432)
            database = config.database or address.database
            raise UserError(
                f"datasource {config.id!r}: role {address.user} may not make its neighbour databases in database "
                f"{database} ({str(exc).strip().splitlines()[0]}): GRANT CREATE ON DATABASE {database} TO "
                f"{address.user}, or name a database it may write in with evals.yaml's neighbours: url_env "
                "(or grade on the original only: --no-neighbours)") from None

    def account(self, config: DatasourceConfig) -> str:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT current_user")
                return self.q(cur.fetchone()[0])
        finally:
            conn.close()

    def _make(self, config: DatasourceConfig, namespace: str, source: Source,
              rows: Mapping[str, Sequence[tuple[Any, ...]]], grantee: str | None) -> None:
        with self._in(config, namespace) as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {self.q(namespace)} CASCADE")
            cur.execute(f"CREATE SCHEMA {self.q(namespace)}")
            for sql in source.types:
                cur.execute(sql)
            for table in source.tables:
                cur.execute(table.create_sql)
            for sql in source.indexes:
                cur.execute(sql)
            for sql in source.constraints:
                cur.execute(sql)
            self._fill(cur, namespace, source, rows)
            for view in source.views:
                cur.execute("SAVEPOINT nl2sql_view")
                try:
                    cur.execute(view)
                    cur.execute("RELEASE SAVEPOINT nl2sql_view")
                except self._pg().Error:  # a view over another schema's tables: left out
                    cur.execute("ROLLBACK TO SAVEPOINT nl2sql_view")
            if grantee is not None:  # the grading role reads it; it owns nothing here and may write nothing
                cur.execute(f"GRANT USAGE ON SCHEMA {self.q(namespace)} TO {grantee}")
                cur.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {self.q(namespace)} TO {grantee}")

    def _fill(self, cur: Any, namespace: str, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]]) -> None:
        def savepoint(c: Any, sql: str) -> None:
            c.execute(sql)

        for table in source.tables:
            self.insert(cur, savepoint, table, list(rows.get(table.name, ())),
                        f"{self.q(namespace)}.{self.q(table.name)}")

    def refill(self, config: DatasourceConfig, namespace: str, source: Source,
               rows: Mapping[str, Sequence[tuple[Any, ...]]], conn: Any = None) -> None:
        own = conn is None
        conn = self.connect(config) if own else conn
        try:
            if self._refill_at_once(conn, namespace, source, rows):
                return
            with self._on(conn, namespace) as cur:  # a row refused: a batch at a time, refused rows left out
                names = ", ".join(f"{self.q(namespace)}.{self.q(t.name)}" for t in source.tables)
                if names:
                    cur.execute(f"TRUNCATE {names}")
                self._fill(cur, namespace, source, rows)
        finally:
            if own:
                conn.close()

    def _refill_at_once(self, conn: Any, namespace: str, source: Source,
                        rows: Mapping[str, Sequence[tuple[Any, ...]]]) -> bool:
        """The whole refill in one round trip (one transaction: the tables emptied children first,
        each table's rows in one INSERT); False, with nothing changed, where the database refuses
        any of it. A witness candidate is a few dozen rows: round trips are what it costs."""
        inserts, params = self._inserts(namespace, source, rows)
        parts = ["BEGIN", *(f"DELETE FROM {self.q(namespace)}.{self.q(t.name)}" for t in reversed(source.tables)),
                 *inserts, "COMMIT"]
        with conn.cursor() as cur:
            try:
                cur.execute(";\n".join(parts), params)
                return True
            except self._pg().Error:
                cur.execute("ROLLBACK")
                return False

    def _inserts(self, namespace: str, source: Source, rows: Mapping[str, Sequence[tuple[Any, ...]]]
                 ) -> tuple[list[str], list[Any]]:
        """Every table's rows as INSERT statements (``BATCH`` rows each), parents first, and their
        parameters in order: to be sent in one message."""
        parts: list[str] = []
        params: list[Any] = []
        for table in source.tables:
            batch = [self.value_row(r) for r in rows.get(table.name, ())]
            marks = "(" + ", ".join(["%s"] * len(table.columns)) + ")"
            for start in range(0, len(batch), BATCH):
                part = batch[start:start + BATCH]
                parts.append(f"INSERT INTO {self.q(namespace)}.{self.q(table.name)} VALUES "
                             f"{', '.join([marks] * len(part))}")
                params += [v for row in part for v in row]
        return parts, params

    def drop(self, config: DatasourceConfig, namespace: str) -> None:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP SCHEMA IF EXISTS {self.q(namespace)} CASCADE")
        finally:
            conn.close()

    def namespaces(self, config: DatasourceConfig) -> list[str]:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s ORDER BY 1", (PREFIX + "%",))
                return [r[0] for r in cur.fetchall()]
        finally:
            conn.close()


def ensure_scratch_database(config: DatasourceConfig) -> None:
    """The scratch database a Postgres datasource's neighbours live in, made where it is missing
    (by the source's role, connected to the source's database); a UserError with the fix where the
    role may not create one."""
    if config.engine != "postgres" or not config.database:
        return
    if config.database in _MADE:
        return
    from nl2sql_assets.datasources.server import ServerAddress

    catalog = PostgresCatalog()
    address = ServerAddress.of(config, ("postgresql", "postgres"), 5432)
    conn = catalog.connect(config, database=address.database)
    pg = catalog._pg()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (config.database,))
            if cur.fetchone() is None:
                try:
                    cur.execute(f"CREATE DATABASE {catalog.q(config.database)}")
                except (pg.errors.DuplicateDatabase, pg.errors.UniqueViolation):
                    pass  # another process made it in the meantime
                except pg.Error as exc:
                    raise UserError(
                        f"datasource {config.id!r}: its neighbour databases live in database {config.database} "
                        f"beside it, which role {address.user} cannot create ({str(exc).strip().splitlines()[0]}): "
                        f"grant it CREATEDB, or create a database for them and name its URL with evals.yaml's "
                        "neighbours: url_env: NL2SQL_NEIGHBOURS_URL") from None
    finally:
        conn.close()
    _MADE.add(config.database)


_MADE: set[str] = set()


class MysqlCatalog(ServerCatalog):
    engine = "mysql"
    quote = "`"
    handle_suffix = ".mysql.json"

    def _my(self) -> Any:
        from nl2sql_assets.datasources.mysql import _driver

        return _driver()

    def connect(self, config: DatasourceConfig, database: str | None = None) -> Any:
        from nl2sql_assets.datasources.base import DatasourceUnavailable
        from nl2sql_assets.datasources.mysql import CONNECT_TIMEOUT_S
        from nl2sql_assets.datasources.server import ServerAddress

        my = self._my()
        a = ServerAddress.of(config, ("mysql", "mariadb"), 3306)
        try:
            return my.connect(host=a.host, port=a.port, user=a.user or "", password=a.password or "",
                              database=database, connect_timeout=CONNECT_TIMEOUT_S, charset="utf8mb4",
                              autocommit=True)
        except my.err.OperationalError as exc:
            raise DatasourceUnavailable(f"{a.where('MySQL', config.id, database)}: cannot connect: {exc}") from None

    def namespaced(self, config: DatasourceConfig, namespace: str) -> DatasourceConfig:
        return config.model_copy(update={"database": namespace})

    def refused(self) -> tuple[type[BaseException], ...]:
        my = self._my()
        return (my.err.IntegrityError, my.err.DataError, my.err.OperationalError)

    def _database(self, config: DatasourceConfig) -> str:
        from nl2sql_assets.datasources.server import ServerAddress

        database = config.database or ServerAddress.of(config, ("mysql", "mariadb"), 3306).database
        if not database:
            raise UserError(f"datasource {config.id!r}: no database to read (name it in the URL or database:)")
        return database

    def read(self, config: DatasourceConfig, namespace: str | None, max_rows: int | None) -> Source:
        database = namespace or self._database(config)
        conn = self.connect(config, database)
        try:
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION READ ONLY")
                cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                            "AND table_type = 'BASE TABLE' ORDER BY table_name", (database,))
                names = [r[0] for r in cur.fetchall()]
                cur.execute("SELECT table_name, column_name, column_type, is_nullable, column_key FROM "
                            "information_schema.columns WHERE table_schema = %s ORDER BY table_name, ordinal_position",
                            (database,))
                columns: dict[str, list[Column]] = {}
                for table, column, type_text, nullable, key in cur.fetchall():
                    columns.setdefault(table, []).append(Column(column, type_text, nullable == "NO", key == "PRI"))
                cur.execute("SELECT table_name, column_name, referenced_table_schema, referenced_table_name, "
                            "referenced_column_name FROM information_schema.key_column_usage WHERE table_schema = %s "
                            "AND referenced_table_name IS NOT NULL", (database,))
                references = cur.fetchall()
                tables: dict[str, Table] = {}
                for name in names:
                    cur.execute(f"SHOW CREATE TABLE {self.q(name)}")
                    create = cur.fetchone()[1]
                    create = create.split(") ENGINE=")[0] + ")" + _table_options(create)
                    table = Table(name, create, columns.get(name, []), quote="`")
                    table.rows = self._sample(cur, database, table, max_rows)
                    tables[name] = table
                for table, column, parent_schema, parent, parent_column in references:
                    if parent_schema != database:
                        raise UserError(f"table {database}.{table} refers to {parent_schema}.{parent}, in another "
                                        "database: neighbour databases are made of one database's tables")
                    if table in tables:
                        tables[table].references[column] = (parent, parent_column)
                cur.execute("SELECT table_name, view_definition FROM information_schema.views WHERE table_schema = %s "
                            "ORDER BY table_name", (database,))
                views = [f"CREATE VIEW {self.q(v)} AS " + (d or "").replace(f"{self.q(database)}.", "")
                         for v, d in cur.fetchall()]
                cur.execute("ROLLBACK")
        finally:
            conn.close()
        return Source(parents_first(tables), views=views)

    def account(self, config: DatasourceConfig) -> str:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT CURRENT_USER()")
                user, _, host = cur.fetchone()[0].rpartition("@")
                return "'" + user.replace("'", "''") + "'@'" + host.replace("'", "''") + "'"
        finally:
            conn.close()

    def allow_reading(self, builder: DatasourceConfig, grantee: str) -> None:
        """One grant covers every namespace of ours (a database-name pattern), so nothing is left
        granted on a database that is dropped."""
        pattern = "`" + PREFIX.replace("_", "\\_") + "%`"
        conn = self.connect(builder)
        try:
            with conn.cursor() as cur:
                cur.execute(f"GRANT SELECT, SHOW VIEW ON {pattern}.* TO {grantee}")
        except self._my().err.MySQLError as exc:
            raise UserError(
                f"the neighbour databases' builder may not let {grantee} read them "
                f"({exc.args[-1] if exc.args else exc}): run, as an administrator, GRANT SELECT, SHOW VIEW ON "
                f"{pattern}.* TO {grantee}") from None
        finally:
            conn.close()

    def _sample(self, cur: Any, database: str, table: Table, max_rows: int | None) -> list[tuple[Any, ...]]:
        """At most ``max_rows`` of a table's rows: slices over its integer key where it is estimated
        large (``keyed``), else from its start. Never a full scan."""
        select = f"SELECT * FROM {self.q(table.name)}"
        if max_rows is None:
            cur.execute(select)
            return [tuple(r) for r in cur.fetchall()]
        cur.execute("SELECT table_rows FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                    (database, table.name))
        found = cur.fetchone()
        if found and int(found[0] or 0) > SPREAD * max_rows:
            rows = self.keyed(cur, select, table, max_rows)
            if rows:
                return rows
        cur.execute(f"{select} LIMIT {int(max_rows)}")
        return [tuple(r) for r in cur.fetchall()]

    def make(self, config: DatasourceConfig, namespace: str, source: Source,
             rows: Mapping[str, Sequence[tuple[Any, ...]]], grantee: str | None = None) -> None:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                try:
                    cur.execute(f"DROP DATABASE IF EXISTS {self.q(namespace)}")
                    cur.execute(f"CREATE DATABASE {self.q(namespace)} CHARACTER SET utf8mb4")
                except self._my().err.MySQLError as exc:
                    from nl2sql_assets.datasources.server import ServerAddress

                    user = ServerAddress.of(config, ("mysql", "mariadb"), 3306).user
                    raise UserError(
                        f"datasource {config.id!r}: user {user} may not make its neighbour databases on this server "
                        f"({exc.args[-1] if exc.args else exc}): GRANT CREATE, DROP, SELECT, INSERT, DELETE ON "
                        f"`{PREFIX.replace('_', chr(92) + '_')}%`.* TO {user}, or name another server with "
                        "evals.yaml's neighbours: url_env (or grade on the original only: --no-neighbours)") from None
                cur.execute(f"USE {self.q(namespace)}")
                cur.execute("SET SESSION foreign_key_checks = 0")
                for table in source.tables:
                    cur.execute(table.create_sql)
                cur.execute("SET SESSION foreign_key_checks = 1")
                self._fill(conn, cur, namespace, source, rows)
                for view in source.views:
                    with contextlib.suppress(self._my().err.MySQLError):
                        cur.execute(view)
        except BaseException:
            with contextlib.suppress(Exception), conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {self.q(namespace)}")
            raise
        finally:
            conn.close()

    def _fill(self, conn: Any, cur: Any, namespace: str, source: Source,
              rows: Mapping[str, Sequence[tuple[Any, ...]]]) -> None:
        def savepoint(c: Any, sql: str) -> None:
            c.execute(sql)

        conn.autocommit(False)
        try:
            cur.execute("START TRANSACTION")
            for table in source.tables:
                self.insert(cur, savepoint, table, list(rows.get(table.name, ())),
                            f"{self.q(namespace)}.{self.q(table.name)}")
            conn.commit()
        finally:
            conn.autocommit(True)

    def connect_to(self, config: DatasourceConfig, namespace: str) -> Any:
        return self.connect(config, namespace)

    def refill(self, config: DatasourceConfig, namespace: str, source: Source,
               rows: Mapping[str, Sequence[tuple[Any, ...]]], conn: Any = None) -> None:
        own = conn is None
        conn = self.connect(config, namespace) if own else conn
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION foreign_key_checks = 0")
                for table in reversed(source.tables):
                    cur.execute(f"DELETE FROM {self.q(namespace)}.{self.q(table.name)}")
                cur.execute("SET SESSION foreign_key_checks = 1")
                self._fill(conn, cur, namespace, source, rows)
        finally:
            if own:
                conn.close()

    def drop(self, config: DatasourceConfig, namespace: str) -> None:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {self.q(namespace)}")
        finally:
            conn.close()

    def namespaces(self, config: DatasourceConfig) -> list[str]:
        conn = self.connect(config)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %s "
                            "ORDER BY 1", (PREFIX.replace("_", "\\_") + "%",))
                return [r[0] for r in cur.fetchall()]
        finally:
            conn.close()


def _table_options(create: str) -> str:
    """The table options of a SHOW CREATE TABLE that decide how values compare (the engine, the
    character set and collation), without the AUTO_INCREMENT counter."""
    if ") ENGINE=" not in create:
        return ""
    options = create.split(") ENGINE=", 1)[1]
    kept = [o for o in ("ENGINE=" + options).split() if not o.upper().startswith("AUTO_INCREMENT=")]
    return " " + " ".join(kept)


#: each server engine's catalog, by the datasource engine's name
CATALOGS: dict[str, type[ServerCatalog]] = {"postgres": PostgresCatalog, "mysql": MysqlCatalog}


def catalog_of(engine: str) -> ServerCatalog:
    return CATALOGS[engine]()
