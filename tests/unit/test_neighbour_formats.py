"""Neighbours of DuckDB datasources (the same schema and constraints, CHECKs kept, small,
deterministic, read-only), the values neighbours are pushed to, and the reversed scans the gold
audit runs gold on."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import stat
from pathlib import Path
from typing import Any

import duckdb
import pytest

from nl2sql_assets.evaluation.neighbours import GoldQuery, distill, generate_neighbours, gold_literals
from nl2sql_assets.evaluation.neighbours.formats import FORMATS, Column, shifted
from nl2sql_assets.evaluation.neighbours.generate import FLAVOURS, _edges

SHOP = """
CREATE TABLE region (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL);
CREATE TABLE customer (
  id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, age INTEGER CHECK (age BETWEEN 18 AND 99),
  joined DATE NOT NULL, balance DECIMAL(10, 2), region_id INTEGER NOT NULL REFERENCES region (id));
CREATE TABLE purchase (
  id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customer (id), item VARCHAR NOT NULL,
  amount DOUBLE, bought TIMESTAMP);
CREATE VIEW big_spenders AS SELECT customer_id, SUM(amount) AS spent FROM purchase GROUP BY customer_id;
"""


@pytest.fixture
def duck_shop(tmp_path: Path) -> Path:
    """A DuckDB shop whose ages never sit on 30 and whose joins all find a partner."""
    path = tmp_path / "shop.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(SHOP)
    conn.executemany("INSERT INTO region VALUES (?, ?)", [(1, "north"), (2, "south")])
    conn.executemany("INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?)",
                     [(i, f"c{i}", 20 + 3 * i if i % 5 else None, dt.date(2020, 1, i), decimal.Decimal(f"{i}.50"),
                       1 + i % 2) for i in range(1, 25)])
    conn.executemany("INSERT INTO purchase VALUES (?, ?, ?, ?, ?)",
                     [(i, 1 + i % 24, f"item{i % 5}", 1.5 * i, dt.datetime(2021, 1, 1 + i % 28, 12)) for i in range(60)])
    conn.close()
    return path


def _constraints_hold(path: Path) -> dict[str, int]:
    """Row counts of every table, after checking each key, reference and CHECK in SQL."""
    conn = duckdb.connect(str(path), read_only=True)
    try:
        counts = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
                  for (t,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        for sql in ("SELECT COUNT(*) - COUNT(DISTINCT id) FROM customer",
                    "SELECT COUNT(*) FROM customer WHERE age NOT BETWEEN 18 AND 99",
                    "SELECT COUNT(*) FROM customer WHERE name IS NULL OR joined IS NULL",
                    "SELECT COUNT(*) FROM customer c LEFT JOIN region r ON r.id = c.region_id WHERE r.id IS NULL",
                    "SELECT COUNT(*) FROM purchase p LEFT JOIN customer c ON c.id = p.customer_id WHERE c.id IS NULL"):
            assert conn.execute(sql).fetchone()[0] == 0, sql
        assert conn.execute("SELECT COUNT(*) FROM big_spenders").fetchone()[0] >= 0  # the view is there
        return counts
    finally:
        conn.close()


def _ddl(path: Path) -> list[Any]:
    conn = duckdb.connect(str(path), read_only=True)
    try:
        return conn.execute("SELECT table_name, sql FROM duckdb_tables() ORDER BY 1").fetchall() + \
            conn.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()
    finally:
        conn.close()


def test_duckdb_neighbours_keep_the_schema_and_every_constraint_and_stay_small(duck_shop: Path,
                                                                             tmp_path: Path) -> None:
    made = generate_neighbours(duck_shop, tmp_path / "n", len(FLAVOURS), seed=3, max_rows=20, engine="duckdb")
    assert [p.name for p in made] == [f"neighbour_{n:02d}.duckdb" for n in range(len(FLAVOURS))]
    sizes = []
    for neighbour in made:
        assert _ddl(neighbour) == _ddl(duck_shop)  # the source's own CREATE statements, the view too
        counts = _constraints_hold(neighbour)
        assert all(n <= 20 + 20 // 4 for n in counts.values())  # max_rows, plus a duplicates neighbour's copies
        assert not neighbour.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        sizes.append(sum(counts.values()))
    assert min(sizes) <= 6 and max(sizes) > 2 * min(sizes)  # a tiny one among them


def test_duckdb_neighbours_are_deterministic(duck_shop: Path, tmp_path: Path) -> None:
    def rows(paths: list[Path]) -> list[str]:
        out = []
        for path in paths:
            conn = duckdb.connect(str(path), read_only=True)
            text = repr([conn.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("customer", "purchase")])
            conn.close()
            out.append(hashlib.sha256(text.encode()).hexdigest())
        return out

    one = generate_neighbours(duck_shop, tmp_path / "a", 4, seed=7, engine="duckdb")
    again = generate_neighbours(duck_shop, tmp_path / "b", 4, seed=7, engine="duckdb")
    other = generate_neighbours(duck_shop, tmp_path / "c", 4, seed=8, engine="duckdb")
    assert rows(one) == rows(again) != rows(other)


def test_duckdb_distillation_tells_a_boundary_apart_and_keeps_equivalents_possibly_equivalent(
        duck_shop: Path, tmp_path: Path) -> None:
    golds = [GoldQuery("older", "SELECT name FROM customer WHERE age >= 30"),
             GoldQuery("since", "SELECT COUNT(*) FROM customer WHERE joined > DATE '2020-01-10'")]
    pool = generate_neighbours(duck_shop, tmp_path / "n", 16, seed=2, engine="duckdb",
                               literals=gold_literals([g.sql for g in golds], dialect="duckdb"))
    result = distill(golds, duck_shop, pool, keep=5, engine="duckdb", workers=1)
    boundary = [m.sql for m in result.mutants["older"]].index("SELECT name FROM customer WHERE age > 30")
    assert ("older", boundary) not in result.on_original  # no age is 30 on the original
    assert any(("older", boundary) in s for s in result.by_neighbour.values())
    assert result.separated == result.separable and 1 <= len(result.kept) <= 5


@pytest.mark.parametrize(("column", "values", "literals", "expected"), [
    # numbers: the ends and one beside each, the gold's literals and one beside each
    (Column("age", "INTEGER", False, False), [23, 26, None, 41], [30], [23, 22, 24, 41, 40, 42, 30, 29, 31]),
    # a CHECKed column stays within its real range (the database would refuse the rest)
    (Column("age", "INTEGER", False, False, checked=True), [23, 26, 41], [30], [23, 24, 41, 40, 30, 29, 31]),
    (Column("x", "DECIMAL(10,2)", False, False), [decimal.Decimal("1.50"), decimal.Decimal("9.50")], [],
     [decimal.Decimal("1.50"), decimal.Decimal("0.50"), decimal.Decimal("2.50"), decimal.Decimal("9.50"),
      decimal.Decimal("8.50"), decimal.Decimal("10.50")]),
    # dates: the ends and a day beside each, a string literal read as a date
    (Column("d", "DATE", True, False), [dt.date(2020, 1, 5), dt.date(2020, 1, 1)], ["2020-01-03"],
     [dt.date(2020, 1, 1), dt.date(2019, 12, 31), dt.date(2020, 1, 2), dt.date(2020, 1, 5), dt.date(2020, 1, 4),
      dt.date(2020, 1, 6), dt.date(2020, 1, 3), dt.date(2020, 1, 2), dt.date(2020, 1, 4)]),
    # text: the gold's literal, an empty string where NULL is allowed, a value of the column
    (Column("name", "TEXT", False, False), ["Rock", "Heavy Metal"], ["Blues"], ["Blues", "", "Rock"]),
    (Column("name", "TEXT", True, False), ["Rock"], [], ["Rock"]),
    # a number compared with a text column of numbers-as-text: in its shape, and one either side
    (Column("year", "TEXT", True, False), ["2013", "2016"], [2014], ["2014", "2013", "2015", "2013"]),
    (Column("n", "INTEGER", False, False), [None, None], [], []),
])
def test_the_values_a_neighbour_pushes_a_column_to(column: Column, values: list[Any], literals: list[Any],
                                                   expected: list[Any]) -> None:
    assert _edges(values, column, literals) == expected


@pytest.mark.parametrize(("value", "step", "expected"), [
    (3, 1, 4), (2.5, -1, 1.5), (decimal.Decimal("1.25"), 1, decimal.Decimal("2.25")),
    (dt.date(2020, 3, 1), -1, dt.date(2020, 2, 29)), (dt.datetime(2020, 1, 1, 9), 1, dt.datetime(2020, 1, 2, 9)),
    (True, 1, None), ("x", 1, None), (None, 1, None),
])
def test_shifted_moves_a_value_within_its_own_kind(value: Any, step: int, expected: Any) -> None:
    assert shifted(value, step) == expected


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_a_reversed_scan_shows_a_result_that_leans_on_the_physical_order(engine: str, duck_shop: Path,
                                                                         tmp_path: Path) -> None:
    files = FORMATS[engine]
    path = duck_shop
    if engine == "sqlite":  # the same shop written as SQLite by the SQLite format
        source = FORMATS["duckdb"].read(duck_shop, max_rows=None)
        for table in source.tables:
            table.create_sql = table.create_sql.replace("DECIMAL(10, 2)", "NUMERIC")
        source.views = [v.replace("CREATE VIEW", "CREATE VIEW IF NOT EXISTS") for v in source.views]
        path = files.write(source, {t.name: [tuple(str(v) if isinstance(v, dt.date | decimal.Decimal) else v
                                                    for v in r) for r in t.rows] for t in source.tables},
                           tmp_path / "shop.sqlite")
    forwards, backwards = files.open(path), files.open_reversed(path)
    try:
        tie = "SELECT name FROM customer ORDER BY region_id LIMIT 1"  # twelve customers share region 1
        broken = "SELECT name FROM customer ORDER BY region_id, id LIMIT 1"
        assert forwards.execute(tie).rows != backwards.execute(tie).rows
        assert forwards.execute(broken).rows == backwards.execute(broken).rows
    finally:
        forwards.close()
        backwards.close()
    if engine == "duckdb":
        assert not backwards.folder.exists()  # the reversed copy is gone with its adapter


def test_a_gold_whose_result_is_nan_is_stored_as_nan_and_an_equal_prediction_holds(duck_shop: Path,
                                                                                     tmp_path: Path) -> None:
    """Each gold's rows on the kept neighbours are stored and read back: a NaN (0.0 / 0.0 on a
    neighbour with no purchases) must come back as NaN, not NULL, or the same SQL would be taken
    back on that neighbour."""
    import math

    from nl2sql_assets.config import DatasourceConfig, NeighbourSettings
    from nl2sql_assets.evaluation.neighbours.store import neighbour_set

    sql = "SELECT ROUND(SUM(amount) / COUNT(amount), 2) AS average, 'NaN'::DOUBLE AS nothing FROM purchase"
    gold = GoldQuery("shop/nan", sql)
    datasource = DatasourceConfig(id="shop", engine="duckdb", path=duck_shop)
    kept = neighbour_set(datasource, [gold], tmp_path / "sets", NeighbourSettings(count=4, candidates=8, witness=0))
    stored = kept.golds[gold.digest].rows
    assert stored and all(rows is not None for rows in stored)
    assert any(math.isnan(rows[0][0][1]) for rows in stored if rows)  # NaN read back as NaN
    with kept.judge() as judge:
        same = judge.overturn(gold, sql.replace("AS average", "AS avg_amount"))
    assert same.passed, (same.neighbour, same.gold_rows, same.predicted_rows)


@pytest.mark.parametrize(("near", "kinds"), [
    ("SELECT name FROM customer WHERE age >= 30", {"comparison"}),  # no age sits on 30 in the shop
    ("SELECT c.name, COUNT(p.id) FROM customer c LEFT JOIN purchase p ON p.customer_id = c.id GROUP BY c.id, c.name",
     {"join"}),  # every customer has a purchase in the shop
])
def test_the_witness_search_works_on_duckdb_too(duck_shop: Path, tmp_path: Path, near: str, kinds: set[str]) -> None:
    from nl2sql_assets.evaluation.neighbours.verdict import neighbour_verdict
    from nl2sql_assets.evaluation.neighbours.witness import WitnessSearch

    gold_sql = near.replace(">=", ">").replace("LEFT JOIN", "JOIN")
    gold = GoldQuery("shop/q", gold_sql)
    assert neighbour_verdict(gold, near, duck_shop, [], engine="duckdb").passed  # the shop hides the difference
    search = WitnessSearch(duck_shop, "duckdb", candidates=32, evidence=tmp_path / "witnesses")
    verdict = neighbour_verdict(gold, near, duck_shop, [], engine="duckdb", witness=search)
    assert verdict.by_witness and verdict.witness is not None and verdict.witness.suffix == ".duckdb"
    assert kinds <= set(verdict.kinds)
    adapter = FORMATS["duckdb"].open(verdict.witness)  # the kept file shows the difference
    try:
        assert adapter.execute(gold_sql).rows != adapter.execute(near).rows
    finally:
        adapter.close()
    same = neighbour_verdict(gold, gold_sql.replace("SELECT name", "SELECT name AS who"), duck_shop, [],
                             engine="duckdb", witness=search)
    assert same.passed
