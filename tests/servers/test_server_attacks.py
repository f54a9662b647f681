"""Attacks on each server through the adapter every path runs SQL through (eval run's executor,
eval grade, regenerate), and denied columns through the final-SQL policy check: writes, DDL, COPY,
SELECT ... INTO, writable CTEs, stacked statements, COMMIT escapes, session-setting chains, file
and session functions, catalogs, EXPLAIN ANALYZE of a write, locks, executable comments. Every one
fails; afterwards the server's tables, roles and other sessions are as they were and no file was
written. The login here is a superuser, as on a developer's laptop: the layers below the role hold."""

from __future__ import annotations

import contextlib
import glob
from typing import Any

import pytest

from nl2sql_assets.config import DatasourceAccess, DatasourceConfig
from nl2sql_assets.datasources.base import DatasourceError
from nl2sql_assets.datasources.registry import open_adapter
from nl2sql_assets.policy import check_sql
from tests.servers.conftest import Server

FILES = "/tmp/nl2sql_attack_*"

COMMON = [
    "INSERT INTO victim VALUES (9, 'x', 1)",
    "UPDATE victim SET name = 'x'",
    "DELETE FROM victim",
    "CREATE TABLE evil (a INT)",
    "DROP TABLE victim",
    "ALTER TABLE victim ADD COLUMN x INT",
    "SELECT * INTO evil FROM victim",
    "SELECT 1; DROP TABLE victim",
    "SELECT 1; COMMIT; DROP TABLE victim",
    "COMMIT; DELETE FROM victim",
    "SELECT 1 AS a; SELECT 2 AS b",
    "GRANT ALL ON victim TO PUBLIC",
    "CREATE ROLE nl2sql_attack_role",
    "SELECT * FROM victim FOR UPDATE",
    "EXPLAIN ANALYZE DELETE FROM victim",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM information_schema.columns WHERE table_name = 'victim'",
    "ANALYZE victim",
    "SET SESSION TRANSACTION READ WRITE",
]
POSTGRES = [
    "TRUNCATE victim",
    "COPY victim TO '/tmp/nl2sql_attack_copy.csv'",
    "COPY (SELECT 1) TO PROGRAM 'touch /tmp/nl2sql_attack_program'",
    "COPY victim FROM '/etc/hostname'",
    "WITH d AS (DELETE FROM victim RETURNING *) SELECT * FROM d",
    "WITH i AS (INSERT INTO victim VALUES (9, 'x', 1) RETURNING id) SELECT id FROM i",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "SELECT set_config('statement_timeout', '0', false)",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
    "RESET ALL",
    "SELECT current_setting('data_directory')",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT pg_read_binary_file('/etc/hostname')",
    "SELECT pg_ls_dir('.')",
    "SELECT pg_stat_file('/etc/hostname')",
    "SELECT lo_import('/etc/hostname')",
    "SELECT lo_export(1, '/tmp/nl2sql_attack_lo')",
    "SELECT pg_terminate_backend({other})",
    "SELECT pg_cancel_backend({other})",
    "SELECT pg_advisory_lock(1)",
    "SELECT pg_try_advisory_lock(1)",
    "SELECT dblink_exec('dbname=test', 'DELETE FROM victim')",
    "SELECT query_to_xml('DELETE FROM victim', true, true, '')",
    "SELECT pg_sleep(30)",
    "SELECT pg_notify('x', 'y')",
    "SELECT nextval('victim_seq')",
    "SELECT * FROM pg_catalog.pg_authid",
    "SELECT * FROM pg_stat_activity",
    "SELECT usename, passwd FROM pg_shadow",
    "SELECT * FROM pg_catalog.pg_class",
    "LOCK TABLE victim",
    "DO $$ BEGIN DELETE FROM victim; END $$",
    "PREPARE evil AS DELETE FROM victim",
    "DECLARE c CURSOR FOR SELECT 1",
    "LISTEN nl2sql",
    "NOTIFY nl2sql",
    "VACUUM victim",
    "CHECKPOINT",
    "SELECT version()",
    "SELECT 'a\\'; DELETE FROM victim; --'",
]
MYSQL = [
    "REPLACE INTO victim VALUES (1, 'x', 1)",
    "SELECT * FROM victim INTO OUTFILE '/tmp/nl2sql_attack_outfile'",
    "SELECT 1 INTO DUMPFILE '/tmp/nl2sql_attack_dumpfile'",
    "SELECT name FROM victim INTO @stolen",
    "LOAD DATA INFILE '/etc/hostname' INTO TABLE victim",
    "SELECT LOAD_FILE('/etc/hostname')",
    "SELECT SLEEP(30)",
    "SELECT BENCHMARK(100000000, MD5('a'))",
    "SELECT GET_LOCK('nl2sql', 1)",
    "SELECT RELEASE_ALL_LOCKS()",
    "SELECT 1 /*!, (SELECT COUNT(*) FROM victim) */",
    "SELECT 1 /*M!, (SELECT COUNT(*) FROM victim) */",
    "SELECT /*+ SET_VAR(sql_mode='ANSI_QUOTES') */ 1",
    "SELECT * FROM mysql.user",
    "SELECT * FROM information_schema.processlist",
    "SELECT * FROM performance_schema.threads",
    "SELECT @@version",
    "SELECT @a := 1",
    "SET GLOBAL max_connections = 1",
    "SET @@session.sql_mode = 'ANSI_QUOTES'",
    "SET STATEMENT max_statement_time = 0 FOR SELECT 1",
    "KILL {other}",
    "KILL QUERY {other}",
    "DO SLEEP(1)",
    "HANDLER victim OPEN",
    "LOCK TABLES victim WRITE",
    "ANALYZE DELETE FROM victim",
    "SELECT * FROM victim LOCK IN SHARE MODE",
    "SHOW GRANTS",
    "SELECT CONNECTION_ID()",
]
#: text that only looks like an attack where the server reads it as the guard does: one string
HARMLESS = {"mysql": ["SELECT 'a\\'; DELETE FROM victim; --' AS s"], "postgres": []}


def _setup(server: Server, namespace: str) -> DatasourceConfig:
    if server.engine == "postgres":
        server.execute(f'CREATE SCHEMA "{namespace}"',
                       f'CREATE TABLE "{namespace}".victim (id INT PRIMARY KEY, name TEXT, salary NUMERIC(10, 2))',
                       f"INSERT INTO \"{namespace}\".victim VALUES (1, 'Ann', 100), (2, 'Bo', 200)",
                       f'CREATE SEQUENCE "{namespace}".victim_seq')
        return DatasourceConfig(id="shop", engine="postgres", url=server.url, schemas=[namespace])
    server.execute(f"CREATE DATABASE `{namespace}`",
                   f"CREATE TABLE `{namespace}`.victim (id INT PRIMARY KEY, name VARCHAR(20), salary DECIMAL(10, 2))",
                   f"INSERT INTO `{namespace}`.victim VALUES (1, 'Ann', 100), (2, 'Bo', 200)")
    return DatasourceConfig(id="shop", engine="mysql", url=server.url, database=namespace)


def _state(server: Server, namespace: str) -> dict[str, Any]:
    """What the attacks must leave as it was: the table's rows, the namespace's tables, the roles."""
    if server.engine == "postgres":
        rows = server.execute(f'SELECT * FROM "{namespace}".victim ORDER BY id')
        tables = server.execute(f"SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                f"WHERE nspname = '{namespace}' ORDER BY 1")
        roles = server.execute("SELECT rolname FROM pg_roles ORDER BY 1")
    else:
        rows = server.execute(f"SELECT * FROM `{namespace}`.victim ORDER BY id")
        tables = server.execute(f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{namespace}'")
        roles = server.execute("SELECT User, Host FROM mysql.user ORDER BY 1, 2")
    return {"rows": [tuple(map(str, r)) for r in rows], "tables": sorted(map(tuple, tables)),
            "roles": sorted(map(tuple, roles)), "files": sorted(glob.glob(FILES))}


def test_every_attack_fails_and_changes_nothing(server: Server, prefix: str) -> None:
    namespace = f"{prefix}shop"
    cfg = _setup(server, namespace)
    other = server.connect()  # another session, which the attacks must leave alone
    try:
        with other.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()" if server.engine == "postgres" else "SELECT CONNECTION_ID()")
            other_id = cur.fetchone()[0]
        before = _state(server, namespace)
        adapter = open_adapter(cfg)
        ran: list[str] = []
        try:
            for attack in COMMON + (POSTGRES if server.engine == "postgres" else MYSQL):
                sql = attack.replace("{other}", str(other_id))
                try:
                    adapter.execute(sql, timeout_s=5)
                except DatasourceError:
                    continue
                ran.append(sql)
            for sql in HARMLESS[server.engine]:  # a backslash escapes the quote on MySQL: one string, one row
                assert adapter.execute(sql).rows == [["a'; DELETE FROM victim; --"]]
            # the adapter still serves reads, with its settings as they were
            assert adapter.execute("SELECT COUNT(*) FROM victim").rows == [[2]]
        finally:
            adapter.close()
        assert ran == []  # every one refused or failed
        assert _state(server, namespace) == before
        with other.cursor() as cur:  # the other session lives on
            cur.execute("SELECT 1")
            assert cur.fetchone()[0] == 1
    finally:
        with contextlib.suppress(Exception):
            other.close()


DENIED = [
    "SELECT salary FROM victim",
    "SELECT SALARY FROM victim",
    "SELECT v.salary FROM victim v",
    "SELECT name FROM victim WHERE salary > 100",
    "SELECT name FROM victim ORDER BY salary",
    "SELECT name FROM victim GROUP BY name HAVING MAX(salary) > 1",
    "SELECT (SELECT MAX(salary) FROM victim) AS m",
    "SELECT * FROM victim",
    "SELECT v.* FROM victim v",
    "SELECT COUNT(DISTINCT salary) FROM victim",
    "SELECT name FROM victim v WHERE EXISTS (SELECT 1 FROM victim w WHERE w.salary = v.salary)",
    "WITH s AS (SELECT salary AS pay FROM victim) SELECT pay FROM s",
    "SELECT * FROM information_schema.columns",
]
DENIED_POSTGRES = [
    'SELECT "salary" FROM victim',
    "SELECT row_to_json(v) FROM victim v",
    "SELECT to_jsonb(v) FROM victim v",
    "SELECT json_agg(v) FROM victim v",
    "SELECT v FROM victim v",
    "SELECT v::text FROM victim v",
    "SELECT (v).* FROM victim v",
    "SELECT (v).salary FROM victim v",
    "SELECT salary FROM {namespace}.victim",
    "SELECT w.salary FROM {namespace}.victim w",
    "SELECT * FROM pg_catalog.pg_attribute",
]
DENIED_MYSQL = [
    "SELECT `salary` FROM victim",
    "SELECT JSON_OBJECT('s', salary) FROM victim",
    "SELECT JSON_ARRAYAGG(salary) FROM victim",
    "SELECT salary FROM {namespace}.victim",
    "SELECT CONCAT(name, salary) FROM `victim`",
    "SELECT * FROM mysql.user",
]


def test_a_denied_column_stays_denied_however_it_is_reached(server: Server, prefix: str) -> None:
    namespace = f"{prefix}shop"
    cfg = _setup(server, namespace)
    adapter = open_adapter(cfg)
    try:
        snapshot = adapter.introspect()
    finally:
        adapter.close()
    access = DatasourceAccess(allow=["*"], deny=["victim.salary"])
    allowed = []
    for sql in DENIED + (DENIED_POSTGRES if server.engine == "postgres" else DENIED_MYSQL):
        sql = sql.replace("{namespace}", namespace)
        decision = check_sql(sql, dialect=adapter.dialect, schema=snapshot, access=access, role="analyst")
        if decision.allowed:
            allowed.append(sql)
    assert allowed == []
    # the same role reads what it may
    for sql in ("SELECT name FROM victim", "SELECT v.name, COUNT(*) AS n FROM victim v GROUP BY v.name"):
        assert check_sql(sql, dialect=adapter.dialect, schema=snapshot, access=access, role="analyst").allowed, sql


@pytest.mark.parametrize("sql", ["SELECT name FROM victim", "SELECT UPPER(name) AS n FROM victim ORDER BY 1"])
def test_plain_reads_run(server: Server, prefix: str, sql: str) -> None:
    adapter = open_adapter(_setup(server, f"{prefix}shop"))
    try:
        assert len(adapter.execute(sql).rows) == 2
    finally:
        adapter.close()


def test_the_servers_own_word_decides_what_a_statement_reads(server: Server, prefix: str) -> None:
    """The server's own word on a statement it never runs: Postgres says which columns it reads (its
    parse analysis, through a temporary view rolled back), and the check's facts cover them; on both
    servers a name the server cannot resolve is the SQL's fault, in the server's words."""
    adapter = open_adapter(_setup(server, f"{prefix}shop"))
    before = _state(server, f"{prefix}shop")
    try:
        error, reads = adapter.statement_reads("SELECT v.name FROM victim v WHERE v.salary > 100 ORDER BY v.id")
        assert error is None
        if server.engine == "postgres":
            assert reads == {("victim", "name"), ("victim", "salary"), ("victim", "id")}
        else:
            assert reads is None  # MariaDB's EXPLAIN names tables, not the columns they give
        snapshot = adapter.introspect()
        wrong = check_sql("SELECT nme FROM victim", dialect=adapter.dialect, schema=snapshot, access=None, role="a",
                          database=adapter.statement_reads)
        assert not wrong.allowed and wrong.fault == "sql" and "nme" in (wrong.detail or "")
        fine = check_sql("SELECT name FROM victim", dialect=adapter.dialect, schema=snapshot, access=None,
                         role="a", database=adapter.statement_reads)
        assert fine.allowed
        assert _state(server, f"{prefix}shop") == before  # nothing of the view is left
    finally:
        adapter.close()
