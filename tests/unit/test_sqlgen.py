"""The SQL generator: each plan construct rendered in both dialects, then real plans run on
Chinook (against hand-written SQL) and on DuckDB (against the same plan on SQLite)."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from nl2sql_assets.datasources.schema import ColumnInfo, SchemaSnapshot, TableInfo
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.engine.sqlgen import generate_sql, qualify_plan

# ---------------------------------------------------------------- plan-building shorthands


def col(name: str, table: str | None = None) -> dict:
    return {"kind": "column", "name": name, **({"table": table} if table else {})}


def lit(value: Any) -> dict:
    return {"kind": "literal", "value": value}


def fn(name: str, *args: dict, distinct: bool = False) -> dict:
    return {"kind": "function", "name": name, "args": list(args), "distinct": distinct}


def star() -> dict:
    return {"kind": "star"}


def op(o: str, left: dict, right: dict) -> dict:
    return {"kind": "binary", "op": o, "left": left, "right": right}


def un(o: str, arg: dict) -> dict:
    return {"kind": "unary", "op": o, "arg": arg}


def part(p: str, arg: dict) -> dict:
    return {"kind": "date_part", "part": p, "arg": arg}


def plan(**kw: Any) -> PlanModel:
    return PlanModel.model_validate(kw)


def sel(*exprs: dict, **kw: Any) -> list[dict]:
    return [{"expr": e} for e in exprs]


# ---------------------------------------------------------------- expressions, one per row

A, B, C = col("a"), col("b"), col("c")
SUB = {"select": [{"expr": col("x")}], "from": {"name": "S"}}
EXPRESSIONS: list[tuple[str, dict, str, str]] = [
    # (id, expression, sqlite, duckdb) rendered as SELECT <expr> AS "v" FROM "T"
    ("null", lit(None), "NULL", "NULL"),
    ("true", lit(True), "TRUE", "TRUE"),
    ("false", lit(False), "FALSE", "FALSE"),
    ("int", lit(42), "42", "42"),
    ("negative int", lit(-3), "-3", "-3"),
    ("float", lit(2.5), "2.5", "2.5"),
    ("string with quote", lit("O'Brien"), "'O''Brien'", "'O''Brien'"),
    ("qualified column", col("Name", "t"), '"t"."Name"', '"t"."Name"'),
    ("odd column name", col('my "col" name'), '"my ""col"" name"', '"my ""col"" name"'),
    ("reserved word column", col("order"), '"order"', '"order"'),
    ("count star", fn("count", star()), "COUNT(*)", "COUNT(*)"),
    ("count distinct", fn("count", A, distinct=True), 'COUNT(DISTINCT "a")', 'COUNT(DISTINCT "a")'),
    ("sum", fn("sum", A), 'SUM("a")', 'SUM("a")'),
    ("avg distinct", fn("avg", A, distinct=True), 'AVG(DISTINCT "a")', 'AVG(DISTINCT "a")'),
    ("min", fn("min", A), 'MIN("a")', 'MIN("a")'),
    ("max", fn("max", A), 'MAX("a")', 'MAX("a")'),
    ("group_concat", fn("group_concat", A), 'GROUP_CONCAT("a")', "STRING_AGG(\"a\", ',')"),
    (
        "group_concat sep",
        fn("group_concat", A, lit("; ")),
        "GROUP_CONCAT(\"a\", '; ')",
        "STRING_AGG(\"a\", '; ')",
    ),
    (
        "group_concat distinct",
        fn("group_concat", A, distinct=True),
        'GROUP_CONCAT(DISTINCT "a")',
        "STRING_AGG(DISTINCT \"a\", ',')",
    ),
    ("lower", fn("lower", A), 'LOWER("a")', 'LOWER("a")'),
    ("upper", fn("upper", A), 'UPPER("a")', 'UPPER("a")'),
    ("length", fn("length", A), 'LENGTH("a")', 'LENGTH("a")'),
    ("abs", fn("abs", A), 'ABS("a")', 'ABS("a")'),
    ("round", fn("round", A, lit(2)), 'ROUND("a", 2)', 'ROUND("a", 2)'),
    ("coalesce", fn("coalesce", A, lit(0)), 'COALESCE("a", 0)', 'COALESCE("a", 0)'),
    ("substr", fn("substr", A, lit(1), lit(4)), 'SUBSTR("a", 1, 4)', 'SUBSTR("a", 1, 4)'),
    ("trim", fn("trim", A), 'TRIM("a")', 'TRIM("a")'),
    ("nullif", fn("nullif", A, lit(0)), 'NULLIF("a", 0)', 'NULLIF("a", 0)'),
    ("ifnull", fn("ifnull", A, lit("-")), "IFNULL(\"a\", '-')", "IFNULL(\"a\", '-')"),
    ("replace", fn("replace", A, lit("x"), lit("y")), "REPLACE(\"a\", 'x', 'y')", "REPLACE(\"a\", 'x', 'y')"),
    ("eq", op("=", A, lit(1)), '"a" = 1', '"a" = 1'),
    ("neq", op("!=", A, lit(1)), '"a" <> 1', '"a" <> 1'),
    ("lt", op("<", A, B), '"a" < "b"', '"a" < "b"'),
    ("le", op("<=", A, B), '"a" <= "b"', '"a" <= "b"'),
    ("gt", op(">", A, B), '"a" > "b"', '"a" > "b"'),
    ("ge", op(">=", A, B), '"a" >= "b"', '"a" >= "b"'),
    ("add", op("+", A, B), '"a" + "b"', '"a" + "b"'),
    ("sub", op("-", A, B), '"a" - "b"', '"a" - "b"'),
    ("mul", op("*", A, B), '"a" * "b"', '"a" * "b"'),
    ("div is native", op("/", A, B), '"a" / "b"', '"a" / "b"'),
    ("mod", op("%", A, B), '"a" % "b"', '"a" % "b"'),
    ("concat", op("||", A, B), '"a" || "b"', '"a" || "b"'),
    ("like", op("like", A, lit("ro%")), "\"a\" LIKE 'ro%'", "\"a\" ILIKE 'ro%'"),
    ("not like", op("not_like", A, lit("ro%")), "NOT \"a\" LIKE 'ro%'", "NOT \"a\" ILIKE 'ro%'"),
    ("and", op("and", A, B), '"a" AND "b"', '"a" AND "b"'),
    ("or", op("or", A, B), '"a" OR "b"', '"a" OR "b"'),
    ("not", un("not", A), 'NOT "a"', 'NOT "a"'),
    ("neg", un("neg", A), '-"a"', '-"a"'),
    ("is null", un("is_null", A), '"a" IS NULL', '"a" IS NULL'),
    ("is not null", un("is_not_null", A), 'NOT "a" IS NULL', 'NOT "a" IS NULL'),
    ("in list", {"kind": "in_list", "arg": A, "values": [lit(1), lit(2)]}, '"a" IN (1, 2)', '"a" IN (1, 2)'),
    (
        "not in list",
        {"kind": "in_list", "arg": A, "values": [lit("x")], "negated": True},
        "NOT \"a\" IN ('x')",
        "NOT \"a\" IN ('x')",
    ),
    (
        "between",
        {"kind": "between", "arg": A, "low": lit(1), "high": lit(9)},
        '"a" BETWEEN 1 AND 9',
        '"a" BETWEEN 1 AND 9',
    ),
    (
        "not between",
        {"kind": "between", "arg": A, "low": lit(1), "high": lit(9), "negated": True},
        'NOT "a" BETWEEN 1 AND 9',
        'NOT "a" BETWEEN 1 AND 9',
    ),
    (
        "case",
        {"kind": "case", "whens": [{"when": op(">", A, lit(0)), "then": lit("pos")}], "else": lit("other")},
        "CASE WHEN \"a\" > 0 THEN 'pos' ELSE 'other' END",
        "CASE WHEN \"a\" > 0 THEN 'pos' ELSE 'other' END",
    ),
    (
        "case without else",
        {"kind": "case", "whens": [{"when": A, "then": lit(1)}, {"when": B, "then": lit(2)}]},
        'CASE WHEN "a" THEN 1 WHEN "b" THEN 2 END',
        'CASE WHEN "a" THEN 1 WHEN "b" THEN 2 END',
    ),
    ("cast integer", {"kind": "cast", "arg": A, "to": "integer"}, 'CAST("a" AS INTEGER)', 'CAST("a" AS INT)'),
    ("cast real", {"kind": "cast", "arg": A, "to": "real"}, 'CAST("a" AS REAL)', 'CAST("a" AS DOUBLE)'),
    ("cast text", {"kind": "cast", "arg": A, "to": "text"}, 'CAST("a" AS TEXT)', 'CAST("a" AS TEXT)'),
    ("year", part("year", A), "CAST(STRFTIME('%Y', \"a\") AS INTEGER)", 'YEAR("a")'),
    ("month", part("month", A), "CAST(STRFTIME('%m', \"a\") AS INTEGER)", 'MONTH("a")'),
    ("day", part("day", A), "CAST(STRFTIME('%d', \"a\") AS INTEGER)", 'DAY("a")'),
    ("year_month", part("year_month", A), "STRFTIME('%Y-%m', \"a\")", "STRFTIME(\"a\", '%Y-%m')"),
    ("date", part("date", A), 'DATE("a")', "STRFTIME(\"a\", '%Y-%m-%d')"),
    ("exists", {"kind": "exists", "plan": SUB}, 'EXISTS(SELECT "x" FROM "S")', 'EXISTS(SELECT "x" FROM "S")'),
    (
        "not exists",
        {"kind": "exists", "plan": SUB, "negated": True},
        'NOT EXISTS(SELECT "x" FROM "S")',
        'NOT EXISTS(SELECT "x" FROM "S")',
    ),
    (
        "in subquery",
        {"kind": "in_subquery", "arg": A, "plan": SUB},
        '"a" IN (SELECT "x" FROM "S")',
        '"a" IN (SELECT "x" FROM "S")',
    ),
    (
        "not in subquery",
        {"kind": "in_subquery", "arg": A, "plan": SUB, "negated": True},
        'NOT "a" IN (SELECT "x" FROM "S")',
        'NOT "a" IN (SELECT "x" FROM "S")',
    ),
    (
        "scalar subquery",
        {"kind": "scalar_subquery", "plan": SUB},
        '(SELECT "x" FROM "S")',
        '(SELECT "x" FROM "S")',
    ),
    # precedence: the tree's shape must survive rendering
    ("and over or", op("and", A, op("or", B, C)), '"a" AND ("b" OR "c")', '"a" AND ("b" OR "c")'),
    ("or over and", op("or", A, op("and", B, C)), '"a" OR "b" AND "c"', '"a" OR "b" AND "c"'),
    ("or on the left of and", op("and", op("or", A, B), C), '("a" OR "b") AND "c"', '("a" OR "b") AND "c"'),
    ("not over and", un("not", op("and", A, B)), 'NOT ("a" AND "b")', 'NOT ("a" AND "b")'),
    ("sub right-nested", op("-", A, op("-", B, C)), '"a" - ("b" - "c")', '"a" - ("b" - "c")'),
    ("sub left-nested", op("-", op("-", A, B), C), '"a" - "b" - "c"', '"a" - "b" - "c"'),
    ("mul over add", op("*", op("+", A, B), C), '("a" + "b") * "c"', '("a" + "b") * "c"'),
    ("neg of sum", un("neg", op("+", A, B)), '-("a" + "b")', '-("a" + "b")'),
    ("neg of negative", un("neg", lit(-2)), "-(-2)", "-(-2)"),
    ("minus negative", op("-", A, lit(-2)), '"a" - -2', '"a" - -2'),
    ("concat of sum", op("||", A, op("+", B, C)), '"a" || ("b" + "c")', '"a" || ("b" + "c")'),
    ("sum of concat", op("+", op("||", A, B), C), '("a" || "b") + "c"', '("a" || "b") + "c"'),
    ("concat chain", op("||", op("||", A, B), C), '"a" || "b" || "c"', '"a" || "b" || "c"'),
    ("comparison of comparison", op("=", op("=", A, B), C), '("a" = "b") = "c"', '("a" = "b") = "c"'),
    ("null test of comparison", un("is_null", op("=", A, B)), '("a" = "b") IS NULL', '("a" = "b") IS NULL'),
    (
        "between with and bound",
        {"kind": "between", "arg": A, "low": op("and", B, C), "high": lit(1)},
        '"a" BETWEEN ("b" AND "c") AND 1',
        '"a" BETWEEN ("b" AND "c") AND 1',
    ),
]


@pytest.mark.parametrize(
    ("case_id", "expr", "sqlite_sql", "duckdb_sql"), EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS]
)
def test_each_expression_renders_in_both_dialects(
    case_id: str, expr: dict, sqlite_sql: str, duckdb_sql: str
) -> None:
    p = plan(select=[{"expr": expr, "alias": "v"}], **{"from": {"name": "T"}})
    assert generate_sql(p, "sqlite") == f'SELECT {sqlite_sql} AS "v" FROM "T"'
    assert generate_sql(p, "duckdb") == f'SELECT {duckdb_sql} AS "v" FROM "T"'


# ---------------------------------------------------------------- statements

T_G = op("=", col("GenreId", "t"), col("GenreId", "g"))
STATEMENTS: list[tuple[str, dict, str, str]] = [
    (
        "distinct from alias",
        {"distinct": True, "select": sel(col("Name", "t")), "from": {"name": "Track", "alias": "t"}},
        'SELECT DISTINCT "t"."Name" FROM "Track" AS "t"',
        'SELECT DISTINCT "t"."Name" FROM "Track" AS "t"',
    ),
    (
        "inner and left joins",
        {
            "select": [{"expr": col("Name", "g"), "alias": "genre"}, {"expr": col("Name", "m")}],
            "from": {"name": "Track", "alias": "t"},
            "joins": [
                {"table": {"name": "Genre", "alias": "g"}, "on": T_G},
                {
                    "type": "left",
                    "table": {"name": "MediaType", "alias": "m"},
                    "on": op("=", col("MediaTypeId", "m"), col("MediaTypeId", "t")),
                },
            ],
        },
        'SELECT "g"."Name" AS "genre", "m"."Name" FROM "Track" AS "t" INNER JOIN "Genre" AS "g" '
        'ON "t"."GenreId" = "g"."GenreId" LEFT JOIN "MediaType" AS "m" ON "m"."MediaTypeId" = "t"."MediaTypeId"',
        'SELECT "g"."Name" AS "genre", "m"."Name" FROM "Track" AS "t" INNER JOIN "Genre" AS "g" '
        'ON "t"."GenreId" = "g"."GenreId" LEFT JOIN "MediaType" AS "m" ON "m"."MediaTypeId" = "t"."MediaTypeId"',
    ),
    (
        "group having order limit offset",
        {
            "select": [{"expr": col("GenreId")}, {"expr": fn("count", star()), "alias": "n"}],
            "from": {"name": "Track"},
            "where": op(">", col("Milliseconds"), lit(60000)),
            "group_by": [col("GenreId")],
            "having": op(">=", fn("count", star()), lit(10)),
            "order_by": [{"expr": col("n"), "direction": "desc"}, {"expr": col("GenreId")}],
            "limit": 5,
            "offset": 10,
        },
        'SELECT "GenreId", COUNT(*) AS "n" FROM "Track" WHERE "Milliseconds" > 60000 GROUP BY "GenreId" '
        'HAVING COUNT(*) >= 10 ORDER BY "n" DESC, "GenreId" ASC LIMIT 5 OFFSET 10',
        'SELECT "GenreId", COUNT(*) AS "n" FROM "Track" WHERE "Milliseconds" > 60000 GROUP BY "GenreId" '
        'HAVING COUNT(*) >= 10 ORDER BY "n" DESC, "GenreId" ASC LIMIT 5 OFFSET 10',
    ),
    (
        "unaliased expressions get the plan's output names",
        {"select": sel(col("a"), fn("count", star()), op("+", A, B)), "from": {"name": "T"}},
        'SELECT "a", COUNT(*) AS "col2", "a" + "b" AS "col3" FROM "T"',
        'SELECT "a", COUNT(*) AS "col2", "a" + "b" AS "col3" FROM "T"',
    ),
    (
        "correlated not exists keeps sub-plan unaliased",
        {
            "select": sel(col("Name", "t")),
            "from": {"name": "Track", "alias": "t"},
            "where": {
                "kind": "exists",
                "negated": True,
                "plan": {
                    "select": sel(lit(1)),
                    "from": {"name": "InvoiceLine", "alias": "il"},
                    "where": op("=", col("TrackId", "il"), col("TrackId", "t")),
                },
            },
        },
        'SELECT "t"."Name" FROM "Track" AS "t" WHERE NOT EXISTS(SELECT 1 FROM "InvoiceLine" AS "il" '
        'WHERE "il"."TrackId" = "t"."TrackId")',
        'SELECT "t"."Name" FROM "Track" AS "t" WHERE NOT EXISTS(SELECT 1 FROM "InvoiceLine" AS "il" '
        'WHERE "il"."TrackId" = "t"."TrackId")',
    ),
    (
        "table names needing quotes",
        {"select": sel(col("select", "my table")), "from": {"name": "my table"}},
        'SELECT "my table"."select" FROM "my table"',
        'SELECT "my table"."select" FROM "my table"',
    ),
]


@pytest.mark.parametrize(
    ("case_id", "data", "sqlite_sql", "duckdb_sql"), STATEMENTS, ids=[s[0] for s in STATEMENTS]
)
def test_statements_render_in_both_dialects(
    case_id: str, data: dict, sqlite_sql: str, duckdb_sql: str
) -> None:
    p = PlanModel.model_validate(data)
    assert generate_sql(p, "sqlite") == sqlite_sql
    assert generate_sql(p, "duckdb") == duckdb_sql


# ---------------------------------------------------------------- explicit names

NAMES = SchemaSnapshot(datasource_id="t", engine="sqlite", tables=[
    TableInfo(name=t, columns=[ColumnInfo(name=c, type="TEXT") for c in cols])
    for t, cols in {"Track": ["TrackId", "Name", "GenreId", "Milliseconds"], "Genre": ["GenreId", "Name"]}.items()
])
N_STAR = fn("count", star())
QUALIFIED = [
    ("a column gets its table",
     {"select": sel(col("Name")), "from": {"name": "Track"}},
     'SELECT "Track"."Name" FROM "Track"'),
    ("a bare ORDER BY key stays the alias",
     {"select": [{"expr": col("Name"), "alias": "n"}], "from": {"name": "Track", "alias": "t"},
      "order_by": [{"expr": col("n")}]},
     'SELECT "t"."Name" AS "n" FROM "Track" AS "t" ORDER BY "n" ASC'),
    ("an alias in HAVING or an ORDER BY expression is written as its expression",
     {"select": [{"expr": col("GenreId")}, {"expr": N_STAR, "alias": "n"}], "from": {"name": "Track"},
      "group_by": [col("GenreId")], "having": op(">", col("n"), lit(10)),
      "order_by": [{"expr": op("*", col("n"), lit(-1))}]},
     'SELECT "Track"."GenreId", COUNT(*) AS "n" FROM "Track" GROUP BY "Track"."GenreId" '
     'HAVING COUNT(*) > 10 ORDER BY COUNT(*) * -1 ASC'),
    ("an alias named like a column is the column inside an ORDER BY expression",
     {"select": [{"expr": col("TrackId"), "alias": "Name"}], "from": {"name": "Track"},
      "order_by": [{"expr": fn("lower", col("Name"))}]},
     'SELECT "Track"."TrackId" AS "Name" FROM "Track" ORDER BY LOWER("Track"."Name") ASC'),
    ("a GROUP BY alias is written as its expression",
     {"select": [{"expr": part("year", col("Milliseconds")), "alias": "y"}, {"expr": N_STAR}],
      "from": {"name": "Track"}, "group_by": [col("y")]},
     'SELECT CAST(STRFTIME(\'%Y\', "Track"."Milliseconds") AS INTEGER) AS "y", COUNT(*) AS "col2" FROM "Track" '
     'GROUP BY CAST(STRFTIME(\'%Y\', "Track"."Milliseconds") AS INTEGER)'),
    ("a name resolves in the nearest plan that has it, correlated ones to the enclosing alias",
     {"select": sel(col("Name", "t")), "from": {"name": "Track", "alias": "t"},
      "where": {"kind": "exists", "plan": {"select": sel(lit(1)), "from": {"name": "Genre", "alias": "g"},
                                           "where": op("and", op("=", col("GenreId"), lit(1)),
                                                       op(">", col("Milliseconds"), lit(1)))}}},
     'SELECT "t"."Name" FROM "Track" AS "t" WHERE EXISTS(SELECT 1 FROM "Genre" AS "g" '
     'WHERE "g"."GenreId" = 1 AND "t"."Milliseconds" > 1)'),
    ("an ambiguous or unknown name is left for the validator",
     {"select": sel(col("GenreId"), col("Nope")), "from": {"name": "Track"}, "joins": [
         {"table": {"name": "Genre"}, "on": op("=", col("GenreId", "Track"), col("GenreId", "Genre"))}]},
     'SELECT "GenreId", "Nope" FROM "Track" INNER JOIN "Genre" ON "Track"."GenreId" = "Genre"."GenreId"'),
]


@pytest.mark.parametrize(("case_id", "data", "sql"), QUALIFIED, ids=[q[0] for q in QUALIFIED])
def test_qualify_plan_makes_every_name_explicit(case_id: str, data: dict, sql: str) -> None:
    assert generate_sql(qualify_plan(PlanModel.model_validate(data), NAMES), "sqlite") == sql


def test_unknown_dialect_is_refused() -> None:
    p = plan(select=sel(A), **{"from": {"name": "T"}})
    with pytest.raises(ValueError, match="unsupported dialect 'oracle'"):
        generate_sql(p, "oracle")


def test_literal_injection_stays_a_string() -> None:
    evil = "x'; DROP TABLE Track; --"
    p = plan(select=sel(A), where=op("=", A, lit(evil)), **{"from": {"name": "T"}})
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE "T" (a TEXT)')
    con.execute('INSERT INTO "T" VALUES (?)', (evil,))
    assert con.execute(generate_sql(p, "sqlite")).fetchall() == [(evil,)]
    dcon = duckdb.connect()
    dcon.execute('CREATE TABLE "T" (a VARCHAR)')
    dcon.execute('INSERT INTO "T" VALUES (?)', [evil])
    assert dcon.execute(generate_sql(p, "duckdb")).fetchall() == [(evil,)]


# ---------------------------------------------------------------- real plans on Chinook


@pytest.fixture(scope="module")
def chinook(chinook_path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{chinook_path}?mode=ro", uri=True)
    yield con
    con.close()


IL_T = op("=", col("TrackId", "il"), col("TrackId", "t"))
CHINOOK_PLANS: list[tuple[str, dict, str, bool]] = [
    (
        "top genres by revenue: joins, group by, order, limit",
        {
            "select": [
                {"expr": col("Name", "g"), "alias": "genre"},
                {
                    "expr": fn("sum", op("*", col("UnitPrice", "il"), col("Quantity", "il"))),
                    "alias": "revenue",
                },
            ],
            "from": {"name": "InvoiceLine", "alias": "il"},
            "joins": [
                {"table": {"name": "Track", "alias": "t"}, "on": IL_T},
                {"table": {"name": "Genre", "alias": "g"}, "on": T_G},
            ],
            "group_by": [col("Name", "g")],
            "order_by": [{"expr": col("revenue"), "direction": "desc"}],
            "limit": 5,
        },
        "SELECT g.Name, SUM(il.UnitPrice * il.Quantity) AS r FROM InvoiceLine il JOIN Track t ON il.TrackId = t.TrackId "
        "JOIN Genre g ON t.GenreId = g.GenreId GROUP BY g.Name ORDER BY r DESC LIMIT 5",
        True,
    ),
    (
        "tracks never purchased: not exists anti-join",
        {
            "select": sel(col("TrackId", "t"), col("Name", "t")),
            "from": {"name": "Track", "alias": "t"},
            "where": {
                "kind": "exists",
                "negated": True,
                "plan": {
                    "select": sel(lit(1)),
                    "from": {"name": "InvoiceLine", "alias": "il"},
                    "where": IL_T,
                },
            },
            "order_by": [{"expr": col("TrackId", "t")}],
        },
        "SELECT t.TrackId, t.Name FROM Track t LEFT JOIN InvoiceLine il ON il.TrackId = t.TrackId "
        "WHERE il.InvoiceLineId IS NULL ORDER BY t.TrackId",
        True,
    ),
    (
        "longest track per genre: correlated not exists",
        {
            "select": [
                {"expr": col("Name", "g"), "alias": "genre"},
                {"expr": col("Name", "t"), "alias": "track"},
                {"expr": col("Milliseconds", "t")},
            ],
            "from": {"name": "Track", "alias": "t"},
            "joins": [{"table": {"name": "Genre", "alias": "g"}, "on": T_G}],
            "where": {
                "kind": "exists",
                "negated": True,
                "plan": {
                    "select": sel(lit(1)),
                    "from": {"name": "Track", "alias": "t2"},
                    "where": op(
                        "and",
                        op("=", col("GenreId", "t2"), col("GenreId", "t")),
                        op(">", col("Milliseconds", "t2"), col("Milliseconds", "t")),
                    ),
                },
            },
            "order_by": [{"expr": col("genre")}, {"expr": col("track")}],
        },
        "SELECT g.Name, t.Name, t.Milliseconds FROM Track t JOIN Genre g ON t.GenreId = g.GenreId "
        "JOIN (SELECT GenreId, MAX(Milliseconds) AS m FROM Track GROUP BY GenreId) x "
        "ON x.GenreId = t.GenreId AND x.m = t.Milliseconds ORDER BY g.Name, t.Name",
        True,
    ),
    (
        "invoices in the latest month: scalar sub-plan over a date part",
        {
            "select": sel(col("InvoiceId"), col("Total")),
            "from": {"name": "Invoice"},
            "where": op(
                "=",
                part("year_month", col("InvoiceDate")),
                {
                    "kind": "scalar_subquery",
                    "plan": {
                        "select": sel(fn("max", part("year_month", col("InvoiceDate")))),
                        "from": {"name": "Invoice"},
                    },
                },
            ),
            "order_by": [{"expr": col("InvoiceId")}],
        },
        "SELECT InvoiceId, Total FROM Invoice WHERE substr(InvoiceDate, 1, 7) = "
        "(SELECT substr(MAX(InvoiceDate), 1, 7) FROM Invoice) ORDER BY InvoiceId",
        True,
    ),
    (
        "sales by year: integer date part",
        {
            "select": [
                {"expr": part("year", col("InvoiceDate")), "alias": "year"},
                {"expr": fn("count", star()), "alias": "invoices"},
                {"expr": fn("round", fn("sum", col("Total")), lit(2)), "alias": "total"},
            ],
            "from": {"name": "Invoice"},
            "group_by": [part("year", col("InvoiceDate"))],
            "order_by": [{"expr": col("year")}],
        },
        "SELECT CAST(substr(InvoiceDate, 1, 4) AS INTEGER) y, COUNT(*), ROUND(SUM(Total), 2) FROM Invoice "
        "GROUP BY y ORDER BY y",
        True,
    ),
    (
        "customers per country: count distinct, having, alias in order by",
        {
            "select": [
                {"expr": col("BillingCountry"), "alias": "country"},
                {"expr": fn("count", col("CustomerId"), distinct=True), "alias": "customers"},
            ],
            "from": {"name": "Invoice"},
            "group_by": [col("BillingCountry")],
            "having": op(">", fn("count", col("CustomerId"), distinct=True), lit(2)),
            "order_by": [{"expr": col("customers"), "direction": "desc"}, {"expr": col("country")}],
        },
        "SELECT BillingCountry, COUNT(DISTINCT CustomerId) c FROM Invoice GROUP BY BillingCountry "
        "HAVING COUNT(DISTINCT CustomerId) > 2 ORDER BY c DESC, BillingCountry",
        True,
    ),
    (
        "artists with a rock album: in sub-plan, like is case-insensitive",
        {
            "distinct": True,
            "select": sel(col("Name", "ar")),
            "from": {"name": "Artist", "alias": "ar"},
            "where": {
                "kind": "in_subquery",
                "arg": col("ArtistId", "ar"),
                "plan": {
                    "select": sel(col("ArtistId", "al")),
                    "from": {"name": "Album", "alias": "al"},
                    "where": op("like", col("Title", "al"), lit("%ROCK%")),
                },
            },
        },
        "SELECT DISTINCT ar.Name FROM Artist ar JOIN Album al ON al.ArtistId = ar.ArtistId "
        "WHERE lower(al.Title) LIKE '%rock%'",
        False,
    ),
]


@pytest.mark.parametrize(
    ("case_id", "data", "hand_sql", "ordered"), CHINOOK_PLANS, ids=[c[0] for c in CHINOOK_PLANS]
)
def test_chinook_plans_match_hand_written_sql(
    chinook: sqlite3.Connection, case_id: str, data: dict, hand_sql: str, ordered: bool
) -> None:
    got = chinook.execute(generate_sql(PlanModel.model_validate(data), "sqlite")).fetchall()
    want = chinook.execute(hand_sql).fetchall()
    assert got, "a plan that returns nothing proves little"
    if ordered:
        assert got == want
    else:
        assert sorted(got) == sorted(want)


# ---------------------------------------------------------------- DuckDB: the same plan, the same rows

EVENTS = [
    (1, "Rock Night", "2011-01-05 20:00:00", 12.5, None),
    (2, "rock brunch", "2011-01-20 11:30:00", 8.0, "vip"),
    (3, "Jazz", "2011-02-01 19:00:00", 20.0, "vip"),
    (4, "Blues", "2012-03-15 21:00:00", 15.0, None),
    (5, "Jazz", "2012-03-31 18:00:00", 22.5, "std"),
]


@pytest.fixture(scope="module")
def engines() -> dict[str, Any]:
    """The same small table in SQLite (dates as text, like Chinook) and DuckDB (TIMESTAMP).
    ``at`` is a reserved word in DuckDB: the generator must quote it."""
    lite = sqlite3.connect(":memory:")
    lite.execute('CREATE TABLE events (id INTEGER, name TEXT, "at" TEXT, price REAL, tier TEXT)')
    lite.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", EVENTS)
    duck = duckdb.connect()
    duck.execute('CREATE TABLE events (id INTEGER, name VARCHAR, "at" TIMESTAMP, price DOUBLE, tier VARCHAR)')
    duck.executemany(
        "INSERT INTO events VALUES (?, ?, CAST(? AS TIMESTAMP), ?, ?)", [list(r) for r in EVENTS]
    )
    return {"sqlite": lite, "duckdb": duck}


def _norm(rows: list[tuple]) -> list[tuple]:
    return [tuple(float(v) if isinstance(v, Decimal) else v for v in r) for r in rows]


AT = col("at", "e")
DUCK_PLANS: list[tuple[str, dict, list[tuple]]] = [
    (
        "date parts",
        {
            "select": sel(
                col("id", "e"),
                part("year", AT),
                part("month", AT),
                part("day", AT),
                part("year_month", AT),
                part("date", AT),
            ),
            "from": {"name": "events", "alias": "e"},
            "order_by": [{"expr": col("id", "e")}],
            "limit": 2,
        },
        [(1, 2011, 1, 5, "2011-01", "2011-01-05"), (2, 2011, 1, 20, "2011-01", "2011-01-20")],
    ),
    (
        "like ignores case on both engines",
        {
            "select": sel(col("id")),
            "from": {"name": "events"},
            "where": op("like", col("name"), lit("rock%")),
            "order_by": [{"expr": col("id")}],
        },
        [(1,), (2,)],
    ),
    (
        "group_concat and count distinct by year",
        {
            "select": [
                {"expr": part("year", col("at")), "alias": "y"},
                {"expr": fn("group_concat", col("name"), distinct=True), "alias": "names"},
                {"expr": fn("count", col("tier"), distinct=True), "alias": "tiers"},
            ],
            "from": {"name": "events"},
            "where": op("=", col("name"), lit("Jazz")),
            "group_by": [part("year", col("at"))],
            "order_by": [{"expr": col("y")}],
        },
        [(2011, "Jazz", 1), (2012, "Jazz", 1)],
    ),
    (
        "latest month via scalar sub-plan, case, cast, null test",
        {
            "select": [
                {"expr": col("id", "e")},
                {
                    "expr": {
                        "kind": "case",
                        "whens": [{"when": un("is_null", col("tier", "e")), "then": lit("none")}],
                        "else": col("tier", "e"),
                    },
                    "alias": "tier",
                },
                {"expr": {"kind": "cast", "arg": col("price", "e"), "to": "text"}, "alias": "price"},
            ],
            "from": {"name": "events", "alias": "e"},
            "where": op(
                "=",
                part("year_month", AT),
                {
                    "kind": "scalar_subquery",
                    "plan": {
                        "select": sel(fn("max", part("year_month", col("at")))),
                        "from": {"name": "events"},
                    },
                },
            ),
            "order_by": [{"expr": col("id", "e")}],
        },
        [(4, "none", "15.0"), (5, "std", "22.5")],
    ),
    (
        "most expensive event per name: correlated not exists, in list, between",
        {
            "select": sel(col("name", "e"), col("price", "e")),
            "from": {"name": "events", "alias": "e"},
            "where": op(
                "and",
                {
                    "kind": "exists",
                    "negated": True,
                    "plan": {
                        "select": sel(lit(1)),
                        "from": {"name": "events", "alias": "o"},
                        "where": op(
                            "and",
                            op("=", col("name", "o"), col("name", "e")),
                            op(">", col("price", "o"), col("price", "e")),
                        ),
                    },
                },
                op(
                    "or",
                    {"kind": "in_list", "arg": col("name", "e"), "values": [lit("Jazz"), lit("Blues")]},
                    {"kind": "between", "arg": col("price", "e"), "low": lit(10), "high": lit(13)},
                ),
            ),
            "order_by": [{"expr": col("price", "e"), "direction": "desc"}],
        },
        [("Jazz", 22.5), ("Blues", 15.0), ("Rock Night", 12.5)],
    ),
    (
        "string functions and concatenation",
        {
            "select": [
                {
                    "expr": op("||", fn("upper", fn("substr", col("name"), lit(1), lit(4))), lit("!")),
                    "alias": "s",
                },
                {"expr": fn("length", fn("replace", col("name"), lit(" "), lit(""))), "alias": "n"},
                {"expr": fn("coalesce", col("tier"), lit("-")), "alias": "t"},
            ],
            "from": {"name": "events"},
            "where": op("<", col("id"), lit(3)),
            "order_by": [{"expr": col("id")}],
        },
        [("ROCK!", 9, "-"), ("ROCK!", 10, "vip")],
    ),
    (
        "group by with alias order and a tie-break",
        {
            "select": [{"expr": col("tier")}, {"expr": fn("count", star()), "alias": "n"}],
            "from": {"name": "events"},
            "where": un("is_not_null", col("tier")),
            "group_by": [col("tier")],
            "order_by": [{"expr": col("n"), "direction": "desc"}, {"expr": col("tier")}],
        },
        [("vip", 2), ("std", 1)],
    ),
]


@pytest.mark.parametrize(("case_id", "data", "expected"), DUCK_PLANS, ids=[c[0] for c in DUCK_PLANS])
def test_duckdb_and_sqlite_agree(
    engines: dict[str, Any], case_id: str, data: dict, expected: list[tuple]
) -> None:
    p = PlanModel.model_validate(data)
    for dialect, con in engines.items():
        rows = _norm(con.execute(generate_sql(p, dialect)).fetchall())  # type: ignore[arg-type]
        assert rows == expected, dialect


def test_null_placement_is_each_engines_own(engines: dict[str, Any]) -> None:
    # Documented, not hidden: SQLite sorts NULL first ascending, DuckDB last, as SQL written
    # by hand for each engine would; the generator adds no NULLS FIRST/LAST clause.
    p = plan(
        select=sel(col("tier")),
        order_by=[{"expr": col("tier")}, {"expr": col("id")}],
        **{"from": {"name": "events"}},
    )
    lite = [r[0] for r in engines["sqlite"].execute(generate_sql(p, "sqlite")).fetchall()]
    duck = [r[0] for r in engines["duckdb"].execute(generate_sql(p, "duckdb")).fetchall()]
    assert lite == [None, None, "std", "vip", "vip"]
    assert duck == ["std", "vip", "vip", None, None]


@pytest.mark.parametrize(("dialect", "desc"), [(d, desc) for d in ("sqlite", "duckdb", "postgres", "mysql")
                                               for desc in (False, True)])
def test_no_engine_gets_a_nulls_clause_its_own_order_would_not_need(dialect: str, desc: bool) -> None:
    """Each engine's own placement of NULLs, in both directions: Postgres puts them last ascending
    and first descending, so a descending key there needs no NULLS clause either (it got NULLS LAST,
    which parted the plan's SQL from hand-written SQL on a database holding a NULL)."""
    p = plan(select=sel(col("tier")), order_by=[{"expr": col("tier"), "direction": "desc" if desc else "asc"}],
             **{"from": {"name": "events"}})
    assert "NULLS" not in generate_sql(p, dialect).upper()  # type: ignore[arg-type]
