"""The gold audit on a small shop database whose suite holds one gold of each kind of trouble
(and one without any), and the slow-gold rule as a table of times."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.config import DatasourceConfig, NeighbourSettings, ProjectConfig
from nl2sql_assets.evaluation.neighbours.audit import audit_suite, slow_flags
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """Ages never sit on 30; twelve customers share each region; a big table the original
    crosses with itself far more slowly than a neighbour of 200 rows does."""
    path = tmp_path / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE region (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER,
                               region_id INTEGER NOT NULL REFERENCES region (id));
        CREATE TABLE event (id INTEGER PRIMARY KEY, kind TEXT NOT NULL);
    """)
    conn.executemany("INSERT INTO region VALUES (?, ?)", [(1, "north"), (2, "south")])
    conn.executemany("INSERT INTO customer VALUES (?, ?, ?, ?)",
                     [(i, f"c{i}", 20 + 3 * i, 1 + i % 2) for i in range(1, 25)])
    conn.executemany("INSERT INTO event VALUES (?, ?)", [(i, f"k{i % 7}") for i in range(1, 6001)])
    conn.commit()
    conn.close()
    return path


def case(case_id: str, sql: str, *, order_matters: bool = False, alt_sql: list[str] | None = None) -> EvalCase:
    return EvalCase.model_validate({
        "id": case_id, "question": f"question {case_id}", "datasources": ["shop"], "status": "approved",
        "outcome": {"admin": "allowed"}, "sql": sql, "rows": [], "order_matters": order_matters,
        "alt_sql": alt_sql or [], "alt_rows": [[] for _ in alt_sql or []]})


CASES = [
    case("fine", "SELECT name FROM customer WHERE age >= 30 ORDER BY id", order_matters=True),
    case("tie", "SELECT name FROM customer ORDER BY region_id LIMIT 1", order_matters=True),
    case("empty", "SELECT name FROM customer WHERE age = 30"),
    case("blind", "SELECT COUNT(*) > -1 AS anything FROM region"),
    case("alt", "SELECT name FROM customer WHERE age > 30",
         alt_sql=["SELECT name FROM customer WHERE age >= 30"]),  # the same rows here: no age is 30
    case("slow", "SELECT COUNT(*) FROM event AS a, event AS b WHERE a.kind = b.kind"),
]


def test_each_kind_of_trouble_is_flagged_on_its_case_and_nothing_else(shop: Path, tmp_path: Path) -> None:
    config = ProjectConfig(datasources=[DatasourceConfig(id="shop", engine="sqlite", path=shop, timeout_s=0.02)])
    config.root = tmp_path
    suite = EvalSuite(cases=CASES)
    audit = audit_suite(config, "shop", suite, NeighbourSettings(count=6, candidates=16, seed=3))
    found = {(f.case, f.kind) for f in audit.flags}
    assert found == {("tie", "order_sensitive"), ("empty", "empty_on_original"), ("blind", "same_everywhere"),
                     ("alt", "alternative_disagrees"), ("slow", "timeout")}, audit.flags
    by = {(f.case, f.kind): f for f in audit.flags}
    assert by[("tie", "order_sensitive")].where == "original"
    assert by[("alt", "alternative_disagrees")].where.startswith("neighbour_")  # the database that shows it
    assert audit.cases == 6 and audit.counts["order_sensitive"] == 1
    assert list(audit.sets) == ["shop"] and Path(audit.sets["shop"]).is_dir()


def test_copies_of_one_gold_are_each_flagged_in_their_own_name(shop: Path, tmp_path: Path) -> None:
    """A suite of copies (one gold asked the same way under many ids) is audited once per gold,
    each copy's flags naming its own case."""
    config = ProjectConfig(datasources=[DatasourceConfig(id="shop", engine="sqlite", path=shop)])
    config.root = tmp_path
    copies = [case(f"empty_{n}", "SELECT name FROM customer WHERE age = 30") for n in range(40)]
    suite = EvalSuite(cases=[*copies, case("fine", "SELECT name FROM customer WHERE age >= 30")])
    audit = audit_suite(config, "shop", suite, NeighbourSettings(count=4, candidates=8, seed=3))
    flagged = [f.case for f in audit.flags if f.kind == "empty_on_original"]
    assert flagged == [f"empty_{n}" for n in range(40)]
    assert all(f.message.startswith(f"suite shop, case '{f.case}': ") for f in audit.flags)


@pytest.mark.parametrize(("times", "expected"), [
    # (case -> seconds; None ran past the timeout) -> the flags raised
    ({"a": 0.001, "b": 0.001, "c": 0.002}, set()),
    ({"a": 0.001, "b": 0.001, "c": 0.2}, {("c", "slow")}),  # 200x the median and over the floor
    ({"a": 0.001, "b": 0.001, "c": 0.03}, set()),  # 30x the median, but 30 ms is no finding
    ({"a": 0.1, "b": 0.1, "c": 0.9}, set()),  # 9x: under the factor
    ({"a": 0.1, "b": 0.1, "c": 1.1}, {("c", "slow")}),
    ({"a": 0.001, "b": None}, {("b", "timeout")}),
    ({"a": None}, {("a", "timeout")}),  # no time finished: no median, only the timeout
])
def test_a_gold_is_slow_only_far_above_the_suite_median(times: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    flags, _ = slow_flags("s", times)
    assert {(f.case, f.kind) for f in flags} == expected


@pytest.mark.parametrize(("sql", "order_matters", "probe_sql", "limit"), [
    # the sort keys appended as columns, one row past the LIMIT; an alias or a position read as its expression
    ("SELECT name FROM t ORDER BY age DESC LIMIT 3", False,
     "SELECT name, age AS tie_key_0 FROM t ORDER BY age DESC LIMIT 4", 3),
    ("SELECT name, SUM(x) AS total FROM t GROUP BY name ORDER BY total DESC, name LIMIT 1", False,
     "SELECT name, SUM(x) AS total, SUM(x) AS tie_key_0, name AS tie_key_1 FROM t GROUP BY name "
     "ORDER BY total DESC, name LIMIT 2", 1),
    ("SELECT name, age FROM t ORDER BY 2", True, "SELECT name, age, age AS tie_key_0 FROM t ORDER BY 2", None),
    # nothing to probe: no LIMIT and the order does not count, DISTINCT, a compound query, no ORDER BY
    ("SELECT name FROM t ORDER BY age", False, None, None),
    ("SELECT DISTINCT name FROM t ORDER BY name LIMIT 2", False, None, None),
    ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1 LIMIT 2", False, None, None),
    ("SELECT name FROM t LIMIT 2", True, None, None),
])
def test_a_gold_with_ordered_rows_is_probed_with_its_sort_keys(sql: str, order_matters: bool,
                                                               probe_sql: str | None, limit: int | None) -> None:
    from nl2sql_assets.evaluation.neighbours.ties import tie_probe

    probe = tie_probe(sql, "sqlite", order_matters)
    assert (probe.sql if probe else None) == probe_sql
    assert probe is None or probe.limit == limit


@pytest.mark.parametrize(("rows", "limit", "order_matters", "tie"), [
    # (shown values..., sort key) rows, as the probe returns them
    ([["a", 3], ["b", 2], ["c", 2]], 2, False, True),  # b and c tie across LIMIT 2: either could be kept
    ([["a", 3], ["b", 2], ["c", 1]], 2, False, False),
    ([["a", 3], ["a", 3], ["c", 1]], 1, False, False),  # tied, but the same answer whichever is kept
    ([["a", 3], ["b", 3], ["c", 1]], 2, False, False),  # a tie inside the result: its order does not count
    ([["a", 3], ["b", 3], ["c", 1]], 2, True, True),  # ... unless the case counts the order
    ([["a", 3], ["b", 2]], None, True, False),
    ([["a", 3]], 1, False, False),  # fewer rows than the LIMIT + 1: no cut to tie across
])
def test_ties_matter_where_the_order_decides_between_rows_that_read_differently(
        rows: list[list[Any]], limit: int | None, order_matters: bool, tie: bool) -> None:
    from nl2sql_assets.evaluation.neighbours.ties import TieProbe, unbroken_tie

    assert unbroken_tie(rows, TieProbe("", limit, 1), order_matters) is tie
