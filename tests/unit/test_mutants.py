"""Near-miss mutants of gold SQL: each rule a row of one-line examples, and every mutant of the
Chinook suite's gold SQL valid SQL that SQLite prepares, never the gold itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nl2sql_assets.evaluation.neighbours import RULES, mutants


def made(sql: str, rule: str, dialect: str = "sqlite") -> list[str]:
    return [m.sql for m in mutants(sql, dialect=dialect, rules={rule: RULES[rule]})]


@pytest.mark.parametrize(("rule", "sql", "expected"), [
    ("comparison", "SELECT a FROM t WHERE x > 3", ["SELECT a FROM t WHERE x >= 3", "SELECT a FROM t WHERE x < 3"]),
    ("comparison", "SELECT a FROM t WHERE x <= 3", ["SELECT a FROM t WHERE x < 3", "SELECT a FROM t WHERE x >= 3"]),
    ("comparison", "SELECT a FROM t WHERE x = 'q'", ["SELECT a FROM t WHERE x <> 'q'"]),
    ("comparison", "SELECT a FROM t JOIN u ON t.id = u.id", []),  # join keys are no near miss
    ("connective", "SELECT a FROM t WHERE x = 1 AND y = 2", ["SELECT a FROM t WHERE x = 1 OR y = 2"]),
    ("connective", "SELECT a FROM t WHERE x = 1 OR y = 2", ["SELECT a FROM t WHERE x = 1 AND y = 2"]),
    ("negation", "SELECT a FROM t WHERE x = 1", ["SELECT a FROM t WHERE NOT (x = 1)"]),
    ("negation", "SELECT a FROM t WHERE NOT x = 1", ["SELECT a FROM t WHERE x = 1"]),
    ("negation", "SELECT a FROM t", []),
    ("dropped_predicate", "SELECT a FROM t WHERE x = 1 AND y = 2",
     ["SELECT a FROM t WHERE x = 1", "SELECT a FROM t WHERE y = 2"]),
    ("dropped_predicate", "SELECT a FROM t WHERE x = 1", []),
    ("aggregate", "SELECT MAX(x) FROM t", ["SELECT MIN(x) FROM t"]),
    ("aggregate", "SELECT SUM(x) FROM t", ["SELECT AVG(x) FROM t", "SELECT COUNT(x) FROM t"]),
    ("aggregate", "SELECT COUNT(x) FROM t", ["SELECT COUNT(DISTINCT x) FROM t"]),
    ("aggregate", "SELECT COUNT(DISTINCT x) FROM t", ["SELECT COUNT(x) FROM t"]),
    ("aggregate", "SELECT COUNT(*) FROM t", []),
    ("distinct", "SELECT a FROM t", ["SELECT DISTINCT a FROM t"]),
    ("distinct", "SELECT DISTINCT a FROM t", ["SELECT a FROM t"]),
    ("join_kind", "SELECT a FROM t JOIN u ON t.id = u.id", ["SELECT a FROM t LEFT JOIN u ON t.id = u.id"]),
    ("join_kind", "SELECT a FROM t LEFT JOIN u ON t.id = u.id", ["SELECT a FROM t JOIN u ON t.id = u.id"]),
    ("join_kind", "SELECT a FROM t CROSS JOIN u", []),
    ("order", "SELECT a FROM t ORDER BY a", ["SELECT a FROM t ORDER BY a DESC"]),
    ("order", "SELECT a FROM t ORDER BY a DESC", ["SELECT a FROM t ORDER BY a ASC"]),
    ("group_by", "SELECT a, b, COUNT(*) FROM t GROUP BY a, b",
     ["SELECT a, b, COUNT(*) FROM t GROUP BY b", "SELECT a, b, COUNT(*) FROM t GROUP BY a"]),
    ("group_by", "SELECT a, COUNT(*) FROM t GROUP BY a", []),
    ("row_window", "SELECT a FROM t LIMIT 1", ["SELECT a FROM t LIMIT 2"]),  # never LIMIT 0
    ("row_window", "SELECT a FROM t LIMIT 4 OFFSET 0",
     ["SELECT a FROM t LIMIT 3 OFFSET 0", "SELECT a FROM t LIMIT 5 OFFSET 0", "SELECT a FROM t LIMIT 4 OFFSET 1"]),
    ("literal", "SELECT a FROM t WHERE x > 3", ["SELECT a FROM t WHERE x > 2", "SELECT a FROM t WHERE x > 4"]),
    ("literal", "SELECT a FROM t WHERE x > 0.5", ["SELECT a FROM t WHERE x > -0.5", "SELECT a FROM t WHERE x > 1.5"]),
    ("literal", "SELECT a FROM t WHERE x = 'q'", []),
    ("literal", "SELECT a FROM t LIMIT 3", []),  # row_window's to edit
])
def test_each_rule_makes_its_near_misses(rule: str, sql: str, expected: list[str]) -> None:
    assert made(sql, rule) == expected


@pytest.mark.parametrize(("dialect", "sql", "expected"), [
    ("sqlite", "SELECT a FROM t ORDER BY a DESC", "SELECT a FROM t ORDER BY a ASC"),
    ("duckdb", "SELECT a FROM t ORDER BY a DESC", "SELECT a FROM t ORDER BY a ASC"),
    ("duckdb", "SELECT a FROM t ORDER BY a", "SELECT a FROM t ORDER BY a DESC"),
])
def test_a_flipped_order_keeps_the_dialect_s_own_place_for_nulls(dialect: str, sql: str, expected: str) -> None:
    assert made(sql, "order", dialect) == [expected]


def test_every_mutant_is_listed_once_and_never_the_gold() -> None:
    sql = "SELECT a FROM t WHERE x > 3 AND x > 3"
    made_all = [m.sql for m in mutants(sql)]
    assert len(made_all) == len(set(made_all))
    assert "SELECT a FROM t WHERE x > 3 AND x > 3" not in made_all


def test_every_mutant_of_the_chinook_gold_is_sql_sqlite_prepares(chinook_path: Path) -> None:
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import chinook_suite_path

    suite = load_suite(chinook_suite_path())
    golds = [c.sql for c in suite.cases if c.sql]
    assert len(golds) >= 40
    conn = sqlite3.connect(f"file:{chinook_path}?mode=ro", uri=True)
    try:
        per_gold: list[int] = []
        kinds: set[str] = set()
        for gold in golds:
            made_here = mutants(gold)
            for mutant in made_here:
                conn.execute("EXPLAIN " + mutant.sql)  # raises on SQL SQLite cannot prepare
                kinds.add(mutant.rule)
            per_gold.append(len(made_here))
    finally:
        conn.close()
    assert min(per_gold) >= 1 and sum(per_gold) >= 5 * len(golds)  # every gold has near misses to tell apart
    assert kinds >= {"comparison", "distinct", "order", "row_window", "aggregate", "join_kind"}
