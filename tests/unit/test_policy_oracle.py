"""The final-SQL check held against SQLite itself, on SQL written in the ways real SQL is written.

SQLite is the oracle: a statement it prepares read-only on the real database file is valid SQL
there, and its authorizer reports every table and column the compiled statement reads. For each
such statement the check must (1) allow it for a role that reads everything, (2) know of every
read SQLite reports, and (3) refuse it, as the policy's fault, for a role denied any table it
reads. The corpus is every SQLite statement of the shipped suites (gold SQL and reviewed
alternatives), each also rewritten as benchmark SQL is written: strings in double quotes
(SQLite's fallback), names upper-cased, in brackets and in backticks, tables aliased T1, T2.

With ``NL2SQL_SPIDER`` naming a Spider folder (``dev.json`` and ``tables.json``), Spider's own
dev gold SQL is checked the same way on schema-only databases built from ``tables.json``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlglot
from sqlglot.tokens import TokenType

from nl2sql_assets.config import DatasourceAccess, DatasourceConfig
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.datasources.sqlite import SqliteAdapter
from nl2sql_assets.evaluation.suites import load_suite
from nl2sql_assets.policy import check_sql

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = DatasourceAccess(allow=["*"])


def sqlite_reads(path: Path, sql: str) -> tuple[set[tuple[str, str]], str | None]:
    """(table, column) reads SQLite's compiler reports for ``sql`` on the file ("" column: the
    table alone), or the error that stopped it."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    reads: set[tuple[str, str]] = set()

    def authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_READ:
            reads.add((arg1 or "", arg2 or ""))
        elif action not in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    conn.set_authorizer(authorize)
    try:
        conn.execute("EXPLAIN " + sql.strip().rstrip(";")).close()
        return reads, None
    except sqlite3.Error as exc:
        return reads, str(exc)
    finally:
        conn.close()


def _rewrite_tokens(sql: str, kind: TokenType, change) -> str:
    out, last = [], 0
    for token in sqlglot.Dialect.get_or_raise("sqlite").tokenize(sql):
        if token.token_type == kind:
            out.append(sql[last:token.start])
            out.append(change(sql[token.start:token.end + 1], token.text))
            last = token.end + 1
    out.append(sql[last:])
    return "".join(out)


def variants(sql: str) -> Iterator[tuple[str, str]]:
    """The statement as written, and as benchmark SQL writes the same thing."""
    yield "as written", sql
    yield "double-quoted strings", _rewrite_tokens(
        sql, TokenType.STRING, lambda raw, text: f'"{text}"' if '"' not in text and "'" not in text else raw)
    yield "upper-case names", _rewrite_tokens(sql, TokenType.VAR, lambda raw, text: text.upper())
    yield "bracketed names", _rewrite_tokens(sql, TokenType.VAR, lambda raw, text: f"[{text}]")
    yield "backticked names", _rewrite_tokens(sql, TokenType.VAR, lambda raw, text: f"`{text}`")


def check_against_sqlite(path: Path, snapshot: SchemaSnapshot, sql: str) -> str | None:
    """Why the check disagrees with SQLite on ``sql``, or None (also when SQLite refuses it)."""
    reads, error = sqlite_reads(path, sql)
    if error is not None:
        return None
    decision = check_sql(sql, dialect="sqlite", schema=snapshot, access=EVERYTHING, role="everything")
    if not decision.allowed:
        return f"refused for a role that reads everything: {decision.rule}: {decision.detail}"
    columns = {c.lower() for c in decision.columns}
    tables = {t.lower() for t in decision.tables}
    for table, column in reads:
        if column.upper() == "ROWID":
            column = "rowid"
        if column and f"{table}.{column}".lower() not in columns:
            return f"SQLite reads {table}.{column}; the check found {sorted(decision.columns)}"
        if table.lower() not in tables:
            return f"SQLite reads table {table}; the check found {sorted(decision.tables)}"
    for table in sorted(decision.tables):
        denied = DatasourceAccess(allow=["*"], deny=[table])
        refusal = check_sql(sql, dialect="sqlite", schema=snapshot, access=denied, role="denied")
        if refusal.allowed or refusal.fault != "policy":
            return f"allowed for a role denied {table}: {refusal.rule} {refusal.detail}"
    return None


@pytest.fixture(scope="module")
def chinook(chinook_path: Path) -> tuple[Path, SchemaSnapshot]:
    adapter = SqliteAdapter(DatasourceConfig(id="chinook", engine="sqlite", path=chinook_path))
    return chinook_path, adapter.introspect()


def _suite_statements() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in sorted((ROOT / "suites").glob("*.yaml")):
        for case in load_suite(path).cases:
            if case.kind != "answer" or case.datasources[:1] != ["chinook"]:
                continue
            for i, sql in enumerate([case.sql, *case.alt_sql]):
                if sql:
                    found.append((f"{path.stem}:{case.id}:{i}", sql))
    return found


def test_the_check_agrees_with_sqlite_on_the_shipped_suites_written_every_way(
        chinook: tuple[Path, SchemaSnapshot]) -> None:
    path, snapshot = chinook
    statements = _suite_statements()
    assert len(statements) >= 60  # the corpus is there
    prepared = 0
    disagreements = []
    for where, sql in statements:
        for how, variant in variants(sql):
            if sqlite_reads(path, variant)[1] is None:
                prepared += 1
            problem = check_against_sqlite(path, snapshot, variant)
            if problem is not None:
                disagreements.append(f"{where} ({how}): {variant}\n    {problem}")
    assert prepared >= 4 * len(statements)  # the rewrites are still SQL SQLite runs
    assert not disagreements, "\n".join(disagreements[:20])


# Hand-made statements where SQLite's own reading is the point.
SQLITE_READINGS = [
    'SELECT Name FROM Genre WHERE Name = "Rock"',
    'SELECT T1.Title FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId WHERE T2.Name = "AC/DC"',
    'SELECT count(*) FROM Track WHERE Composer LIKE "%Bach%" OR Name IN ("Dazed", "Mine")',
    'SELECT "Name", "hello" FROM Genre ORDER BY "Name"',
    'SELECT FirstName AS n FROM Customer WHERE "n" = "Luis"',
    'SELECT FirstName FROM Customer WHERE EXISTS (SELECT 1 FROM Employee WHERE "LastName" = "Adams")',
    'SELECT c.FirstName FROM Customer c WHERE c.SupportRepId IN (SELECT EmployeeId FROM Employee '
    'WHERE "FirstName" = c."FirstName")',
    'SELECT rowid, oid, _rowid_ FROM Genre',
    'SELECT t.rowid FROM Track t JOIN Genre g USING (GenreId)',
    'SELECT x FROM (SELECT Name AS x FROM Genre) WHERE "x" <> "Rock"',
    'WITH g AS (SELECT * FROM Genre) SELECT "Name" FROM g WHERE "GenreId" > 3',
    'SELECT [Name], `GenreId` FROM [Genre] WHERE [Name] = "Jazz"',
    'SELECT Name FROM Genre GROUP BY "Name" HAVING count("GenreId") > 0',
]


@pytest.mark.parametrize("sql", SQLITE_READINGS)
def test_the_check_reads_what_sqlite_reads(chinook: tuple[Path, SchemaSnapshot], sql: str) -> None:
    path, snapshot = chinook
    assert sqlite_reads(path, sql)[1] is None, "SQLite itself must run the statement"
    assert check_against_sqlite(path, snapshot, sql) is None


def _spider_folder() -> Path | None:
    value = os.environ.get("NL2SQL_SPIDER")
    return Path(value).expanduser() if value else None


@pytest.mark.skipif(_spider_folder() is None, reason="NL2SQL_SPIDER names no Spider folder (dev.json, tables.json)")
def test_the_check_agrees_with_sqlite_on_spider_dev_gold(tmp_path: Path) -> None:
    from nl2sql_assets.public_benchmarks.synthetic import build_databases

    folder = _spider_folder()
    assert folder is not None
    questions = json.loads((folder / "dev.json").read_text(encoding="utf-8"))
    databases = build_databases(folder / "tables.json", tmp_path, db_ids={q["db_id"] for q in questions})
    snapshots = {db: SqliteAdapter(DatasourceConfig(id=db, engine="sqlite", path=p)).introspect()
                 for db, p in databases.items()}
    prepared = 0
    disagreements = []
    for index, question in enumerate(questions):
        db, sql = question["db_id"], question["query"]
        if sqlite_reads(databases[db], sql)[1] is None:
            prepared += 1
        problem = check_against_sqlite(databases[db], snapshots[db], sql)
        if problem is not None:
            disagreements.append(f"dev {index} ({db}): {sql}\n    {problem}")
    assert prepared >= 0.99 * len(questions)
    assert not disagreements, f"{len(disagreements)} of {len(questions)}:\n" + "\n".join(disagreements[:20])
