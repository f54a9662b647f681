"""Each server's values normalised as the file engines' are (the table in the README, "Evaluate on
your Postgres or MySQL"), and read by the comparator as SQLite's text and numbers read."""

from __future__ import annotations

import math

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.datasources.registry import open_adapter
from nl2sql_assets.evaluation.judging.comparison import compare_results
from tests.servers.conftest import Server

# (SQL expression, the normalised value, a SQLite value it compares equal to (None: none asked))
POSTGRES = [
    ("CAST(12345.67 AS NUMERIC(20, 2))", 12345.67, 12345.67),
    ("CAST(123456789012345678901234567890 AS NUMERIC)", 123456789012345678901234567890, None),
    ("CAST(0.1 AS NUMERIC(10, 4))", 0.1, 0.1),
    ("CAST(42 AS BIGINT)", 42, 42),
    ("CAST('2013-12-22' AS DATE)", "2013-12-22", "2013-12-22"),
    ("CAST('2013-12-22 10:11:12' AS TIMESTAMP)", "2013-12-22 10:11:12", "2013-12-22 10:11:12"),
    ("CAST('2013-12-22 10:11:12+02' AS TIMESTAMPTZ)", "2013-12-22 08:11:12", "2013-12-22 08:11:12"),
    ("CAST('10:11:12' AS TIME)", "10:11:12", "10:11:12"),
    ("CAST('1 day 2 hours' AS INTERVAL)", 93600.0, 93600),
    ("TRUE", True, 1),
    ("CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS UUID)", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", None),
    ("CAST('{\"b\": 1, \"a\": [1, 2]}' AS JSON)", '{"a":[1,2],"b":1}', None),
    ("CAST('{\"b\": 1, \"a\": [1, 2]}' AS JSONB)", '{"a":[1,2],"b":1}', None),
    ("ARRAY[1, 2, 3]", [1, 2, 3], None),
    ("CAST('\\x0102ff' AS BYTEA)", "0102ff", None),
    ("CAST('happy' AS {namespace}.mood)", "happy", "happy"),
    ("CAST('NaN' AS DOUBLE PRECISION)", math.nan, math.nan),
    ("CAST('Infinity' AS DOUBLE PRECISION)", math.inf, math.inf),
    ("CAST('-Infinity' AS NUMERIC)", -math.inf, -math.inf),
    ("CAST(NULL AS TEXT)", None, None),
]
MYSQL = [
    ("CAST(12345.67 AS DECIMAL(20, 2))", 12345.67, 12345.67),
    ("CAST(42 AS SIGNED)", 42, 42),
    ("CAST('2013-12-22' AS DATE)", "2013-12-22", "2013-12-22"),
    ("CAST('2013-12-22 10:11:12' AS DATETIME)", "2013-12-22 10:11:12", "2013-12-22 10:11:12"),
    ("CAST('10:11:12' AS TIME)", "10:11:12", "10:11:12"),
    ("CAST('-01:02:03' AS TIME)", "-01:02:03", None),
    ("b", 1, 1),
    ("flag", 1, 1),
    ("mood", "happy", "happy"),
    ("data", "0102ff", None),
    ("CAST(123456789012345678901234567890 AS DECIMAL(40, 0))", 123456789012345678901234567890, None),
]


def _table(server: Server, namespace: str) -> DatasourceConfig:
    if server.engine == "postgres":
        server.execute(f'CREATE SCHEMA "{namespace}"', f"CREATE TYPE \"{namespace}\".mood AS ENUM ('sad', 'happy')",
                       f'CREATE TABLE "{namespace}".one (id INT)', f'INSERT INTO "{namespace}".one VALUES (1)')
        return DatasourceConfig(id="v", engine="postgres", url=server.url, schemas=[namespace])
    server.execute(f"CREATE DATABASE `{namespace}`",
                   f"CREATE TABLE `{namespace}`.one (id INT, b BIT(1), flag BOOLEAN, mood ENUM('sad', 'happy'), "
                   "data BLOB)",
                   f"INSERT INTO `{namespace}`.one VALUES (1, b'1', TRUE, 'happy', X'0102ff')")
    return DatasourceConfig(id="v", engine="mysql", url=server.url, database=namespace)


def test_values_read_as_the_file_engines_values(server: Server, prefix: str) -> None:
    namespace = f"{prefix}values"
    adapter = open_adapter(_table(server, namespace))
    try:
        for expression, expected, sqlite in (POSTGRES if server.engine == "postgres" else MYSQL):
            sql = f"SELECT {expression.replace('{namespace}', namespace)} AS v FROM one"
            (value,) = adapter.execute(sql).rows[0]
            if isinstance(expected, float) and math.isnan(expected):
                assert isinstance(value, float) and math.isnan(value), (sql, value)
            else:
                assert value == expected and type(value) is type(expected), (sql, value)
            if sqlite is not None:
                assert compare_results([[sqlite]], [[value]]), (sql, value, sqlite)
    finally:
        adapter.close()
