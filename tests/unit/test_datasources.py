"""Adapters (SQLite, DuckDB), the read-only guard and the registry, on real database files."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import duckdb
import pytest

from nl2sql_assets.config import ConfigError, DatasourceConfig, ProjectConfig
from nl2sql_assets.datasources import (
    DatasourceAdapter,
    DatasourceError,
    DatasourceRegistry,
    QueryFailed,
    QueryTimeout,
    ReadOnlyViolation,
    check_read_only,
    normalise_value,
    open_adapter,
)
from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter
from nl2sql_assets.datasources.sqlite import SqliteAdapter
from nl2sql_assets.demo import read_chinook_customers, write_support


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def chinook_file(chinook_path: Path) -> Path:
    return chinook_path


@pytest.fixture
def sqlite_copy(tmp_path: Path, chinook_file: Path) -> Path:
    target = tmp_path / "chinook.sqlite"
    shutil.copyfile(chinook_file, target)
    return target


@pytest.fixture(scope="module")
def support_file(tmp_path_factory: pytest.TempPathFactory, chinook_file: Path) -> Path:
    folder = tmp_path_factory.mktemp("duck")
    return write_support(folder / "support.duckdb", read_chinook_customers(chinook_file))


def sqlite_adapter(path: Path, **kw: object) -> SqliteAdapter:
    return SqliteAdapter(DatasourceConfig(id="chinook", engine="sqlite", path=path, **kw))


def duck_adapter(path: Path, **kw: object) -> DuckDBAdapter:
    return DuckDBAdapter(DatasourceConfig(id="support", engine="duckdb", path=path, **kw))


@pytest.fixture
def sqlite_db(sqlite_copy: Path) -> SqliteAdapter:
    return sqlite_adapter(sqlite_copy)


@pytest.fixture
def duck_db(support_file: Path):
    adapter = duck_adapter(support_file)
    yield adapter
    adapter.close()


# ---------------------------------------------------------------- the guard, on its own

GUARD_CASES = [
    # (sql, dialect, allowed)
    ("SELECT 1", "sqlite", True),
    ("SELECT 1;", "sqlite", True),
    ("  select 1 ;  ", "duckdb", True),
    ("-- the answer\nSELECT 42", "sqlite", True),
    ("(SELECT 1) UNION (SELECT 2)", "sqlite", True),
    ("SELECT 1 UNION ALL SELECT 2", "duckdb", True),
    ("SELECT 1 EXCEPT SELECT 2", "duckdb", True),
    ("WITH a AS (SELECT 1 AS x) SELECT x FROM a", "sqlite", True),
    ("VALUES (1), (2)", "duckdb", True),
    ("SELECT ';' AS semicolon", "sqlite", True),
    ("INSERT INTO t VALUES (1)", "sqlite", False),
    ("UPDATE t SET a = 1", "duckdb", False),
    ("DELETE FROM t", "sqlite", False),
    ("DROP TABLE t", "duckdb", False),
    ("CREATE TABLE x AS SELECT 1", "sqlite", False),
    ("ALTER TABLE t ADD COLUMN b INT", "duckdb", False),
    ("ATTACH 'other.db' AS other", "sqlite", False),
    ("DETACH other", "duckdb", False),
    ("PRAGMA user_version = 5", "sqlite", False),
    ("PRAGMA table_info('t')", "sqlite", False),
    ("VACUUM", "sqlite", False),
    ("COPY t TO 'out.csv'", "duckdb", False),
    ("EXPORT DATABASE 'dump'", "duckdb", False),
    ("INSTALL httpfs", "duckdb", False),
    ("LOAD httpfs", "duckdb", False),
    ("SET threads = 4", "duckdb", False),
    ("BEGIN", "sqlite", False),
    ("SELECT 1; SELECT 2", "sqlite", False),
    ("SELECT 1; DROP TABLE t", "duckdb", False),
    ("WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a", "sqlite", False),
    ("WITH a AS (DELETE FROM t RETURNING *) SELECT * FROM a", "duckdb", False),
    ("SELECT * INTO copy_of_t FROM t", "duckdb", False),
]


@pytest.mark.parametrize(("sql", "dialect", "allowed"), GUARD_CASES)
def test_guard_allows_only_one_read(sql: str, dialect: str, allowed: bool) -> None:
    if allowed:
        cleaned = check_read_only(sql, dialect)
        assert not cleaned.endswith(";")
    else:
        with pytest.raises(ReadOnlyViolation, match="read"):
            check_read_only(sql, dialect)


def test_guard_empty_sql_is_a_failure_not_a_write() -> None:
    with pytest.raises(QueryFailed, match="empty"):
        check_read_only("  ;  ", "sqlite")


# ---------------------------------------------------------------- writes refused, file unchanged

WRITES = {
    "sqlite": [
        "INSERT INTO Genre (GenreId, Name) VALUES (99, 'Polka')",
        "UPDATE Genre SET Name = 'x'",
        "DELETE FROM Genre",
        "DROP TABLE Genre",
        "CREATE TABLE x (a INTEGER)",
        "ATTACH '{attach}' AS other",
        "PRAGMA user_version = 5",
        "SELECT 1; DELETE FROM Genre",
    ],
    "duckdb": [
        "INSERT INTO agents VALUES (99, 'X', 'billing', DATE '2010-01-01')",
        "UPDATE agents SET team = 'x'",
        "DELETE FROM agents",
        "DROP TABLE agents",
        "CREATE TABLE x (a INTEGER)",
        "ATTACH '{attach}' AS other",
        "PRAGMA user_version = 5",
        "SELECT 1; DELETE FROM agents",
    ],
}


@pytest.mark.parametrize(
    "index", range(8), ids=["insert", "update", "delete", "drop", "create", "attach", "pragma", "two"]
)
@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_writes_are_refused_and_the_file_is_unchanged(
    engine: str, index: int, sqlite_copy: Path, support_file: Path, tmp_path: Path
) -> None:
    path = sqlite_copy if engine == "sqlite" else support_file
    adapter = sqlite_adapter(path) if engine == "sqlite" else duck_adapter(path)
    before = sha256(path)
    attach = tmp_path / "attached.db"
    try:
        with pytest.raises(ReadOnlyViolation):
            adapter.execute(WRITES[engine][index].format(attach=attach))
    finally:
        adapter.close()
    assert sha256(path) == before
    assert not attach.exists()


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO Genre (GenreId, Name) VALUES (99, 'Polka')",
        "ATTACH '{attach}' AS other",
        "PRAGMA user_version = 5",
    ],
)
def test_sqlite_database_layer_refuses_when_the_guard_is_bypassed(
    statement: str, sqlite_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("nl2sql_assets.datasources.sqlite.check_read_only", lambda sql, dialect: sql)
    attach = tmp_path / "attached.db"
    before = sha256(sqlite_copy)
    with pytest.raises(ReadOnlyViolation, match="refused"):
        sqlite_adapter(sqlite_copy).execute(statement.format(attach=attach))
    assert sha256(sqlite_copy) == before
    assert not attach.exists()


@pytest.mark.parametrize(
    "statement", ["DELETE FROM agents", "SELECT 1; DELETE FROM agents", "COPY agents TO '{out}'"]
)
def test_duckdb_database_layer_refuses_when_the_guard_is_bypassed(
    statement: str, support_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("nl2sql_assets.datasources.duckdb_adapter.check_read_only", lambda sql, dialect: sql)
    out = tmp_path / "out.csv"
    before = sha256(support_file)
    adapter = duck_adapter(support_file)
    try:
        with pytest.raises(ReadOnlyViolation):
            adapter.execute(statement.format(out=out))
        # Underneath both checks, the connection itself is read-only and has no file access.
        cursor = adapter._cursor()
        with pytest.raises(duckdb.Error):
            cursor.execute("DELETE FROM agents")
        with pytest.raises(duckdb.Error):
            cursor.execute(f"COPY agents TO '{out}'")
        cursor.close()
    finally:
        adapter.close()
    assert sha256(support_file) == before
    assert not out.exists()


def test_reads_with_a_trailing_semicolon_and_comments_run(
    sqlite_db: SqliteAdapter, duck_db: DuckDBAdapter
) -> None:
    assert sqlite_db.execute("-- how many genres\nSELECT COUNT(*) FROM Genre;").rows == [[25]]
    assert duck_db.execute("SELECT COUNT(*) FROM agents; ").rows == [[12]]


# ---------------------------------------------------------------- row limit

ROW_LIMIT_CASES = [
    # (call limit, rows the query makes, rows returned, truncated)
    (10, 3503, 10, True),
    (5, 5, 5, False),
    (5, 6, 5, True),
    (1, 0, 0, False),
]


@pytest.mark.parametrize(("limit", "made", "returned", "truncated"), ROW_LIMIT_CASES)
def test_sqlite_row_limit_cuts_and_says_so(
    sqlite_db: SqliteAdapter, limit: int, made: int, returned: int, truncated: bool
) -> None:
    out = sqlite_db.execute(
        f"SELECT TrackId FROM Track WHERE TrackId <= {made} ORDER BY TrackId", row_limit=limit
    )
    assert len(out.rows) == returned
    assert out.truncated is truncated
    assert out.row_limit == limit
    assert [r[0] for r in out.rows] == list(range(1, returned + 1))


@pytest.mark.parametrize(("limit", "made", "returned", "truncated"), ROW_LIMIT_CASES)
def test_duckdb_row_limit_cuts_and_says_so(
    duck_db: DuckDBAdapter, limit: int, made: int, returned: int, truncated: bool
) -> None:
    out = duck_db.execute(f"SELECT range FROM range(1, {made + 1}) ORDER BY range", row_limit=limit)
    assert (len(out.rows), out.truncated, out.row_limit) == (returned, truncated, limit)


def test_config_row_limit_applies_when_the_call_gives_none(sqlite_copy: Path, support_file: Path) -> None:
    out = sqlite_adapter(sqlite_copy, row_limit=7).execute("SELECT * FROM Track")
    assert (len(out.rows), out.truncated, out.row_limit) == (7, True, 7)
    adapter = duck_adapter(support_file, row_limit=3)
    try:
        out = adapter.execute("SELECT * FROM customers")
        assert (len(out.rows), out.truncated) == (3, True)
        assert out.columns[:2] == ["customer_id", "email"]
    finally:
        adapter.close()


# ---------------------------------------------------------------- timeouts


def test_sqlite_runaway_query_is_interrupted(sqlite_db: SqliteAdapter) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="timeout"):
        sqlite_db.execute(
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
            timeout_s=0.5,
        )
    assert time.monotonic() - started < 1.0
    assert sqlite_db.execute("SELECT 1").rows == [[1]]


def test_duckdb_runaway_query_is_interrupted(duck_db: DuckDBAdapter) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="timeout"):
        duck_db.execute(
            "SELECT sum(a.range * b.range) FROM range(1000000) a CROSS JOIN range(1000000) b", timeout_s=0.5
        )
    assert time.monotonic() - started < 1.0
    # The shared connection is still good afterwards.
    assert duck_db.execute("SELECT 1").rows == [[1]]


def test_database_errors_become_query_failed_with_the_message(
    sqlite_db: SqliteAdapter, duck_db: DuckDBAdapter
) -> None:
    with pytest.raises(QueryFailed, match="no such column"):
        sqlite_db.execute("SELECT Nope FROM Track")
    with pytest.raises(QueryFailed, match="nope"):
        duck_db.execute("SELECT nope FROM agents")
    with pytest.raises(QueryFailed):
        duck_db.execute("SELECT * FROM read_csv('/etc/hostname')")  # no file access from queries


# ---------------------------------------------------------------- values


def test_duckdb_values_are_normalised(duck_db: DuckDBAdapter) -> None:
    out = duck_db.execute(
        "SELECT 1.50::DECIMAL(10,2), DATE '2011-02-03', TIMESTAMP '2011-02-03 04:05:06', "
        "TIMESTAMP '2011-02-03 04:05:06.25', TIME '10:11:12', '\\xAA\\x01'::BLOB, "
        "'6f1c1c8a-64c5-4c8a-9c55-1f2e3d4c5b6a'::UUID, true, NULL, 'text', 7, 2.5::DOUBLE"
    )
    assert out.rows == [
        [
            1.5,
            "2011-02-03",
            "2011-02-03 04:05:06",
            "2011-02-03 04:05:06.250000",
            "10:11:12",
            "aa01",
            "6f1c1c8a-64c5-4c8a-9c55-1f2e3d4c5b6a",
            True,
            None,
            "text",
            7,
            2.5,
        ]
    ]


def test_sqlite_values_are_normalised(sqlite_db: SqliteAdapter) -> None:
    out = sqlite_db.execute("SELECT x'AA01', Total, InvoiceDate, NULL FROM Invoice WHERE InvoiceId = 1")
    assert out.rows == [["aa01", 1.98, "2009-01-01 00:00:00", None]]
    assert out.columns == ["x'AA01'", "Total", "InvoiceDate", "NULL"]


def test_normalise_value_table() -> None:
    import datetime as dt
    import uuid
    from decimal import Decimal

    cases = [
        (Decimal("3.10"), 3.1),
        (dt.date(2013, 12, 22), "2013-12-22"),
        (dt.datetime(2013, 12, 22, 8, 9, 10), "2013-12-22 08:09:10"),
        (dt.datetime(2013, 12, 22, 8, 9, 10, 500), "2013-12-22 08:09:10.000500"),
        (dt.time(7, 8, 9), "07:08:09"),
        (b"\x00\xff", "00ff"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (True, True),
        (0, 0),
        (1.25, 1.25),
        ("x", "x"),
        (None, None),
    ]
    for value, expected in cases:
        got = normalise_value(value)
        assert got == expected and type(got) is type(expected), (value, got)


# ---------------------------------------------------------------- introspection


def test_chinook_introspection(sqlite_db: SqliteAdapter) -> None:
    snap = sqlite_db.introspect()
    assert snap.engine == "sqlite" and snap.datasource_id == "chinook"
    assert snap.table_names == [
        "Album", "Artist", "Customer", "Employee", "Genre", "Invoice",
        "InvoiceLine", "MediaType", "Playlist", "PlaylistTrack", "Track",
    ]  # fmt: skip
    invoice = snap.table("invoice")
    assert invoice is not None
    assert [(fk.columns, fk.ref_table, fk.ref_columns) for fk in invoice.foreign_keys] == [
        (["CustomerId"], "Customer", ["CustomerId"])
    ]
    track = snap.table("Track")
    assert track is not None and track.primary_key == ["TrackId"]
    assert [c.name for c in track.columns][:3] == ["TrackId", "Name", "AlbumId"]
    assert track.column("trackid").primary_key and not track.column("Name").primary_key
    assert track.column("UnitPrice").type == "NUMERIC(10,2)"
    assert track.column("Name").nullable is False and track.column("Composer").nullable is True
    assert snap.table("PlaylistTrack").primary_key == ["PlaylistId", "TrackId"]
    employee = snap.table("Employee")
    assert (["ReportsTo"], "Employee", ["EmployeeId"]) in [
        (f.columns, f.ref_table, f.ref_columns) for f in employee.foreign_keys
    ]
    assert snap.column_count == 64


def test_duckdb_introspection(duck_db: DuckDBAdapter) -> None:
    snap = duck_db.introspect()
    assert snap.engine == "duckdb"
    assert snap.table_names == ["agents", "customers", "ticket_messages", "tickets"]
    tickets = snap.table("tickets")
    assert tickets.primary_key == ["ticket_id"]
    assert sorted((fk.columns[0], fk.ref_table, fk.ref_columns[0]) for fk in tickets.foreign_keys) == [
        ("agent_id", "agents", "agent_id"),
        ("customer_id", "customers", "customer_id"),
    ]
    assert tickets.column("created_at").type == "TIMESTAMP"
    assert tickets.column("resolved_at").nullable is True
    assert tickets.column("ticket_id").nullable is False


def test_fingerprint_is_stable_and_changes_with_a_column(
    sqlite_copy: Path, support_file: Path, tmp_path: Path
) -> None:
    first = sqlite_adapter(sqlite_copy).introspect().fingerprint()
    assert sqlite_adapter(sqlite_copy).introspect().fingerprint() == first
    conn = sqlite3.connect(sqlite_copy)
    conn.execute("ALTER TABLE Genre ADD COLUMN Mood TEXT")
    conn.commit()
    conn.close()
    assert sqlite_adapter(sqlite_copy).introspect().fingerprint() != first

    duck_copy = tmp_path / "support.duckdb"
    shutil.copyfile(support_file, duck_copy)
    adapter = duck_adapter(duck_copy)
    before = adapter.introspect().fingerprint()
    adapter.close()
    adapter = duck_adapter(duck_copy)
    assert adapter.introspect().fingerprint() == before
    adapter.close()
    conn = duckdb.connect(str(duck_copy))
    conn.execute("ALTER TABLE agents ADD COLUMN phone VARCHAR")
    conn.close()
    adapter = duck_adapter(duck_copy)
    try:
        assert adapter.introspect().fingerprint() != before
    finally:
        adapter.close()


# ---------------------------------------------------------------- missing files


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_missing_file_names_the_datasource_and_path(engine: str, tmp_path: Path) -> None:
    path = tmp_path / f"nowhere.{engine}"
    cfg = DatasourceConfig(id="lost", engine=engine, path=path)
    with pytest.raises(DatasourceError, match=r"'lost'.*nowhere"):
        open_adapter(cfg)
    assert not path.exists()


# ---------------------------------------------------------------- threads and the registry


def test_duckdb_calls_from_several_threads(duck_db: DuckDBAdapter) -> None:
    results: dict[int, object] = {}

    def work(i: int) -> None:
        results[i] = duck_db.execute(f"SELECT count(*) + {i} FROM tickets").rows[0][0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    base = duck_db.execute("SELECT count(*) FROM tickets").rows[0][0]
    assert results == {i: base + i for i in range(8)}


def test_registry_opens_lazily_caches_and_lists(sqlite_copy: Path, support_file: Path) -> None:
    config = ProjectConfig(
        datasources=[
            DatasourceConfig(id="chinook", engine="sqlite", path=sqlite_copy),
            DatasourceConfig(id="support", engine="duckdb", path=support_file),
            DatasourceConfig(id="later", engine="sqlite", path=sqlite_copy.parent / "not-yet.sqlite"),
        ]
    )
    with DatasourceRegistry(config) as registry:
        assert registry.ids == ["chinook", "support", "later"]  # nothing opened, so the missing file is fine
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(registry.get("support"))) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len({id(a) for a in seen}) == 1
        assert registry.get("chinook").dialect == "sqlite" and registry.get("support").dialect == "duckdb"
        assert all(isinstance(registry.get(i), DatasourceAdapter) for i in ("chinook", "support"))
        assert registry.cached_snapshot("chinook") is None  # nothing taken yet: no database work
        assert registry.snapshot("chinook") is registry.snapshot("chinook")
        assert registry.cached_snapshot("chinook") is registry.snapshot("chinook")
        assert "support" in registry and "nope" not in registry
        with pytest.raises(ConfigError, match=r"unknown datasource 'nope'.*chinook.*support"):
            registry.get("nope")
        with pytest.raises(DatasourceError, match="not-yet"):
            registry.get("later")


def test_registry_from_adapters(sqlite_copy: Path) -> None:
    adapter = sqlite_adapter(sqlite_copy)
    registry = DatasourceRegistry.from_adapters({"chinook": adapter})
    assert registry.ids == ["chinook"]
    assert registry.get("chinook") is adapter
    assert registry.snapshot("chinook").table("Track") is not None
    registry.close()
    assert registry.get("chinook") is adapter  # kept: it was handed in


# ---------------------------------------------------------------- functions and configuration, at the engine

# (SQL, None when it runs, else the error class): SQLite admits only reviewed functions.
SQLITE_FUNCTIONS = [
    ("SELECT upper(Name), length(Name), substr(Name, 1, 2) FROM Genre WHERE GenreId = 1", None),
    ("SELECT strftime('%Y', InvoiceDate), round(avg(Total), 2) FROM Invoice GROUP BY 1 LIMIT 1", None),
    ("SELECT Name FROM Genre WHERE Name LIKE 'r%' AND coalesce(Name, '') != '' LIMIT 1", None),
    ("SELECT Name, row_number() OVER (ORDER BY Name) FROM Genre LIMIT 1", None),
    ("SELECT group_concat(Name, ',') FROM (SELECT Name FROM Genre ORDER BY Name LIMIT 2)", None),
    ("SELECT fts3_tokenizer('simple')", ReadOnlyViolation),  # returns a pointer when allowed
    ("SELECT load_extension('/tmp/x')", ReadOnlyViolation),
    ("SELECT hex(randomblob(100000000))", ReadOnlyViolation),
    ("SELECT zeroblob(1000000000)", ReadOnlyViolation),
    ("SELECT sqlite_version()", ReadOnlyViolation),
    ("SELECT sqlite_compileoption_get(0)", ReadOnlyViolation),
    ("SELECT value FROM json_each('[1, 2]')", DatasourceError),  # its constructor is refused
    ("SELECT readfile('/etc/passwd')", QueryFailed),  # CLI-only: not even defined here
    ("SELECT writefile('/tmp/x', 'y')", QueryFailed),
    ("SELECT edit('x', 'vi')", QueryFailed),
]


@pytest.mark.parametrize(("sql", "error"), SQLITE_FUNCTIONS, ids=[s for s, _ in SQLITE_FUNCTIONS])
def test_sqlite_runs_only_reviewed_functions(sql: str, error: type[Exception] | None, sqlite_db: SqliteAdapter) -> None:
    if error is None:
        assert sqlite_db.execute(sql).rows
    else:
        with pytest.raises(error):
            sqlite_db.execute(sql)


def test_every_committed_suite_runs_under_the_function_allow_list(sqlite_db: SqliteAdapter) -> None:
    from nl2sql_assets.engine.sqlgen import generate_sql, qualify_plan
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import chinook_suite_path

    snapshot = sqlite_db.introspect()
    ran = 0
    for case in load_suite(chinook_suite_path()).cases:
        if case.kind == "probe":
            continue  # a probe's SQL goes to the policy check, never to a database
        statements = [s for s in (case.sql, *case.alt_sql) if s]
        if case.plan is not None:
            statements.append(generate_sql(qualify_plan(case.plan, snapshot), "sqlite"))
        for sql in statements:
            sqlite_db.execute(sql)
            ran += 1
    assert ran >= 90  # every sql, alt_sql and generated plan of the suite


def test_duckdb_connections_have_no_file_access_and_a_locked_configuration(duck_db: DuckDBAdapter) -> None:
    cursor = duck_db._cursor()
    try:
        assert cursor.execute("SELECT current_setting('enable_external_access'), "
                              "current_setting('lock_configuration')").fetchone() == (False, True)
        for statement in ("SET enable_external_access = true", "SET lock_configuration = false",
                          "RESET enable_external_access", "SET threads = 4"):
            with pytest.raises(duckdb.Error):
                cursor.execute(statement)
        for statement in ("SELECT * FROM read_csv('/etc/passwd')", "SELECT * FROM read_text('/etc/hostname')",
                          "SELECT * FROM glob('/etc/*')", "INSTALL httpfs", "LOAD httpfs"):
            with pytest.raises(duckdb.Error):
                cursor.execute(statement)
    finally:
        cursor.close()
    # ... and stays fully usable for queries and for schema introspection.
    assert duck_db.execute("SELECT team, COUNT(*) FROM agents GROUP BY team ORDER BY team").rows
    snapshot = duck_db.introspect()
    assert {"agents", "customers", "tickets", "ticket_messages"} <= set(snapshot.table_names)
    assert snapshot.table("tickets").foreign_keys  # type: ignore[union-attr]


@pytest.mark.parametrize(("engine", "module", "url"), [
    ("postgres", "psycopg2", "postgresql://me@127.0.0.1:1/sales"),
    ("mysql", "pymysql", "mysql://me@127.0.0.1:1/sales"),
])
def test_a_missing_server_driver_is_named_with_the_fix(engine: str, module: str, url: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from nl2sql_assets.config import DatasourceConfig
    from nl2sql_assets.datasources.base import DatasourceError
    from nl2sql_assets.datasources.registry import open_adapter

    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(DatasourceError, match=r"driver \w+ is not installed: pip install"):
        open_adapter(DatasourceConfig(id="sales", engine=engine, url=url))


@pytest.mark.parametrize(("fields", "words"), [
    ({"engine": "postgres", "path": "x.db"}, ["path: a Postgres datasource is reached by URL", "url_env"]),
    ({"engine": "postgres"}, ["url_env: a Postgres datasource needs its URL"]),
    ({"engine": "sqlite", "url": "postgresql://me@h/db"}, ["url: a SQLite datasource is a file"]),
    ({"engine": "oracle", "url": "oracle://me@h/db"}, ["engine: unknown database engine 'oracle'", "postgres"]),
])
def test_a_datasource_that_does_not_fit_its_engine_is_named(fields: dict, words: list[str]) -> None:
    from nl2sql_assets.config import ConfigError, DatasourceConfig
    from nl2sql_assets.datasources.engines import check_datasource

    with pytest.raises(ConfigError) as info:
        check_datasource(DatasourceConfig(id="sales", **fields))
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("url", ["postgresql://me:hunter2@db/sales", "mysql://me:s3cr%40t@db:3306/sales"])
def test_a_url_with_a_password_is_refused_in_the_config(url: str) -> None:
    from pydantic import ValidationError

    from nl2sql_assets.config import DatasourceConfig

    with pytest.raises(ValidationError, match=r"carries a password.*url_env.*password_env"):
        DatasourceConfig(id="sales", engine="postgres", url=url)
