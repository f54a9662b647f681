"""What the witness search reads in two queries (``focus.difference``) and the databases it builds
(``targeted``): each a small table of cases."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from nl2sql_assets.evaluation.neighbours.focus import LikePattern, difference, focus_of
from nl2sql_assets.evaluation.neighbours.formats import format_of
from nl2sql_assets.evaluation.neighbours.targeted import STRATEGIES, build, like_spellings, values_for

GOLD = "SELECT c.name, COUNT(o.id) AS n FROM customer c JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name"


@pytest.mark.parametrize(("gold", "predicted", "kinds"), [
    # the same question: aliases, spacing and letter case never lead a search
    (GOLD, GOLD.replace("AS n", "AS orders_count"), None),
    (GOLD, GOLD.replace("customer c", "customer AS cc").replace("c.", "cc."), None),
    ("SELECT name FROM customer WHERE id > 3", "select NAME  from CUSTOMER where ID > 3", None),
    # each kind of edit named
    ("SELECT name FROM customer WHERE id > 3", "SELECT name FROM customer WHERE id > 4", {"literal"}),
    ("SELECT name FROM customer WHERE id > 3", "SELECT name FROM customer WHERE id >= 3", {"comparison"}),
    (GOLD, GOLD.replace("JOIN orders", "LEFT JOIN orders"), {"join"}),
    (GOLD, GOLD.replace("COUNT(o.id)", "COUNT(DISTINCT o.id)"), {"aggregate"}),
    (GOLD + " HAVING COUNT(o.id) > 2", GOLD + " HAVING COUNT(o.id) >= 2", {"comparison", "threshold"}),
    (GOLD + " ORDER BY n DESC, c.name LIMIT 3", GOLD + " ORDER BY n DESC, c.name DESC LIMIT 3", {"order"}),
    (GOLD + " ORDER BY n DESC LIMIT 3", GOLD + " ORDER BY n DESC LIMIT 4", {"limit"}),
    ("SELECT name FROM customer", "SELECT DISTINCT name FROM customer", {"distinct"}),
    (GOLD, GOLD.replace("GROUP BY c.id, c.name", "GROUP BY c.name"), {"group"}),
    ("SELECT name FROM customer WHERE city = 'Oslo'", "SELECT name FROM customer WHERE city LIKE 'Oslo'",
     {"comparison", "predicate"}),
    # a self-join keeps its aliases: e.name and m.name are other columns
    ("SELECT m.name FROM emp e JOIN emp m ON m.id = e.boss WHERE e.name = 'Jo'",
     "SELECT e.name FROM emp e JOIN emp m ON m.id = e.boss WHERE e.name = 'Jo'", {"other"}),
])
def test_the_difference_names_the_kinds_of_edit(gold: str, predicted: str, kinds: set[str] | None) -> None:
    found = difference(gold, predicted)
    if kinds is None:
        assert found is None
        return
    assert found is not None and kinds <= found.kinds, found.kinds if found else None


def test_unparsable_sql_leads_no_search() -> None:
    assert difference("SELECT name FROM customer", "SELEC nme FRM") is None


@pytest.mark.parametrize(("sql", "what", "expected"), [
    ("SELECT * FROM t WHERE x > 30", "literals", {"x": [30]}),
    ("SELECT * FROM t WHERE name = 'Rock' AND y BETWEEN 1 AND 5", "literals", {"name": ["Rock"], "y": [1, 5]}),
    ("SELECT * FROM t WHERE name LIKE 'IT %'", "literals", {"name": [LikePattern("IT %")]}),
    ("SELECT a FROM t GROUP BY a HAVING COUNT(*) > 100", "thresholds", [("count", None, 100.0)]),
    ("SELECT a, SUM(b) AS s FROM t GROUP BY a HAVING s >= 7.5", "thresholds", [("sum", (None, "b"), 7.5)]),
    ("SELECT a FROM t ORDER BY a LIMIT 5 OFFSET 10", "cut", 15),
    ("SELECT a, COUNT(*) AS n FROM t GROUP BY a ORDER BY n DESC LIMIT 3", "aggregate_sort", True),
    ("SELECT COUNT(DISTINCT t.b) FROM t", "distinct_columns", {("t", "b")}),
    ("SELECT x.a FROM t x LEFT JOIN u ON u.id = x.u", "outer_join", True),
])
def test_a_query_s_focus(sql: str, what: str, expected: object) -> None:
    focus = focus_of(sql)
    assert focus is not None
    got = getattr(focus, what)
    if what == "thresholds":
        got = [(t.aggregate, t.column, t.value) for t in got]
    assert got == expected


@pytest.mark.parametrize(("pattern", "matches", "first"), [
    ("IT %", ["IT x", "it x", "IT  x"], "IT x"),
    ("%Music", ["xMusic", "Music", "xmusic"], "xMusic"),
    ("A_C", ["AxC", "axc"], "AxC"),
])
def test_a_like_pattern_is_written_filled_in(pattern: str, matches: list[str], first: str) -> None:
    spellings = like_spellings(pattern)
    assert spellings[0] == first
    assert set(matches) <= set(spellings)


# ---------------------------------------------------------------- the databases built

SHOP = """
CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customer(id),
                     total REAL CHECK (total >= 0), day TEXT);
CREATE TABLE tag (name TEXT PRIMARY KEY);
CREATE TABLE order_tag (order_id INTEGER NOT NULL REFERENCES orders(id), tag TEXT NOT NULL REFERENCES tag(name),
                        PRIMARY KEY (order_id, tag));
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SHOP)
    conn.executemany("INSERT INTO customer VALUES (?, ?, ?)",
                     [(i, f"name{i % 7}", ["Oslo", "Lima", None][i % 3]) for i in range(1, 30)])
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)",
                     [(i, 1 + i % 29, float(i % 11), f"2024-01-{1 + i % 28:02d} 00:00:00") for i in range(1, 120)])
    conn.executemany("INSERT INTO tag VALUES (?)", [("red",), ("blue",), ("green",)])
    conn.executemany("INSERT INTO order_tag VALUES (?, ?)", [(i, ["red", "blue", "green"][i % 3]) for i in range(1, 60)])
    conn.commit()
    conn.close()
    return path


def _holds(path: Path) -> None:
    """Every key unique and every reference pointing at a row that is there (SQLite's own check)."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


QUERIES = [
    "SELECT c.name, COUNT(o.id) FROM customer c JOIN orders o ON o.customer_id = c.id GROUP BY c.id "
    "HAVING COUNT(o.id) > 40 ORDER BY 2 DESC, c.name LIMIT 3",
    "SELECT t.tag, COUNT(DISTINCT o.customer_id) FROM order_tag t JOIN orders o ON o.id = t.order_id "
    "WHERE o.day >= '2024-01-10' GROUP BY t.tag",
    "SELECT name FROM customer WHERE city LIKE 'Os%' AND name <> 'x'",
]


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_builds_a_database_that_keeps_every_key_and_reference(shop: Path, tmp_path: Path,
                                                                            sql: str, strategy: str) -> None:
    files = format_of("sqlite")
    source = files.read(shop, 200)
    focus = focus_of(sql)
    assert focus is not None
    for seed in range(5):
        rows = build(source, focus, random.Random(seed), [strategy], turn=seed % 3)
        scratch = files.scratch(source, rows, files.template(source))
        try:
            saved = scratch.save(tmp_path / f"{strategy}_{seed}.sqlite")
        finally:
            scratch.close()
        _holds(saved)
        conn = sqlite3.connect(saved)
        try:  # the rows built are the rows there: none refused (keys fresh, references pointed at rows kept)
            for table, built in rows.items():
                assert conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0] == len(built), (strategy, table)
        finally:
            conn.close()


@pytest.mark.parametrize(("turn", "size"), [(0, 40), (1, 41), (2, 39)])
def test_a_threshold_gets_a_group_of_exactly_its_size_then_one_either_side(shop: Path, turn: int, size: int) -> None:
    files = format_of("sqlite")
    source = files.read(shop, 200)
    focus = focus_of(QUERIES[0])
    assert focus is not None
    rows = build(source, focus, random.Random(7), ["threshold"], turn=turn)
    groups: dict[object, int] = {}
    for row in rows["orders"]:
        groups[row[1]] = groups.get(row[1], 0) + 1
    assert sorted(groups.values()) == [size]  # one customer's orders: exactly that many


def test_a_composite_key_copy_keeps_the_grouped_column_and_gets_a_fresh_parent(shop: Path) -> None:
    """order_tag's key is two references: a copy for a group by tag keeps the tag and points at a
    fresh copy of an order (the group grows; no key is taken twice)."""
    files = format_of("sqlite")
    source = files.read(shop, 200)
    focus = focus_of("SELECT tag, COUNT(*) FROM order_tag GROUP BY tag HAVING COUNT(*) > 25")
    assert focus is not None
    rows = build(source, focus, random.Random(3), ["threshold"], turn=0)
    tags = {row[1] for row in rows["order_tag"]}
    assert len(rows["order_tag"]) == 25 and len(tags) == 1
    assert len({row[0] for row in rows["order_tag"]}) == 25  # each copy its own order
    order_ids = {row[0] for row in rows["orders"]}
    assert {row[0] for row in rows["order_tag"]} <= order_ids


@pytest.mark.parametrize(("wanted", "exact", "near"), [
    ([30], [30], [29, 31]),
    (["2024-01-10"], ["2024-01-10 00:00:00"], ["2024-01-09 00:00:00", "2024-01-11 00:00:00"]),
])
def test_compared_values_are_written_as_the_column_writes_its_values(shop: Path, wanted: list[object],
                                                                    exact: list[object], near: list[object]) -> None:
    source = format_of("sqlite").read(shop, 200)
    orders = next(t for t in source.tables if t.name == "orders")
    index = orders.index("day") if isinstance(wanted[0], str) else orders.index("id")
    got_exact, got_near = values_for(orders, index, wanted)
    assert got_exact == exact
    assert set(near) <= set(got_near)


@pytest.mark.parametrize(("gold", "predicted", "limit", "shown", "first"), [
    ([[1], [2]], [[1], [3]], 20, ([[1], [2]], [[1], [3]]), 1),  # short: all of it
    ([[i] for i in range(30)], [[i] for i in range(29)], 20,  # the first 20 agree: from two rows before the difference
     ([[i] for i in range(27, 30)], [[27], [28]]), 28),
    ([[i] for i in range(30)], [[i] for i in range(5)] + [[99]] * 25, 10,  # differs early: from the start
     ([[i] for i in range(10)], [[0], [1], [2], [3], [4], [99], [99], [99], [99], [99]]), 1),
    ([[1]], None, 20, ([[1]], None), 1),  # the prediction failed there
])
def test_evidence_is_taken_where_the_two_results_differ(gold: list[list[int]], predicted: list[list[int]] | None,
                                                        limit: int, shown: tuple[object, object], first: int) -> None:
    from nl2sql_assets.evaluation.neighbours.verdict import evidence

    got_gold, got_predicted, rows_from = evidence(gold, predicted, limit)
    assert (got_gold, got_predicted) == shown and rows_from == first
