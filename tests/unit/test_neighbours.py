"""Neighbour databases: the same schema and constraints as their source, small, deterministic,
read-only; and the neighbours distillation keeps tell near-miss SQL apart from its gold where the
original database cannot."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
from pathlib import Path

import pytest

from nl2sql_assets.evaluation.neighbours.distill import GoldQuery, distill
from nl2sql_assets.evaluation.neighbours.generate import FLAVOURS, generate_neighbours

SHOP = """
CREATE TABLE region (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE customer (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, region_id INTEGER NOT NULL REFERENCES region(id),
  referred_by INTEGER REFERENCES customer(id));
CREATE TABLE purchase (
  customer_id INTEGER NOT NULL REFERENCES customer(id), item TEXT NOT NULL, amount REAL,
  PRIMARY KEY (customer_id, item));
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A small database whose ages never sit on 30, the gold's boundary below."""
    path = tmp_path / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SHOP)
    conn.executemany("INSERT INTO region VALUES (?, ?)", [(1, "north"), (2, "south")])
    conn.executemany("INSERT INTO customer VALUES (?, ?, ?, ?, ?)",
                     [(i, f"c{i}", 20 + 3 * i if i % 4 else None, 1 + i % 2, i - 1 if i > 1 else None)
                      for i in range(1, 25)])
    conn.executemany("INSERT INTO purchase VALUES (?, ?, ?)",
                     [(1 + i % 24, f"item{i % 5}", 1.5 * i) for i in range(60)])
    conn.commit()
    conn.close()
    return path


def _schema(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    finally:
        conn.close()


def _counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()


def _digest(paths: list[Path]) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


@pytest.mark.parametrize("source", ["shop", "chinook"])
def test_neighbours_keep_the_schema_and_every_constraint_and_stay_small(
        source: str, shop: Path, chinook_path: Path, tmp_path: Path) -> None:
    path = shop if source == "shop" else chinook_path
    made = generate_neighbours(path, tmp_path / "neighbours", len(FLAVOURS), seed=3, max_rows=50)
    assert [p.name for p in made] == [f"neighbour_{n:02d}.sqlite" for n in range(len(FLAVOURS))]
    for neighbour in made:
        assert _schema(neighbour) == _schema(path)  # the source's own CREATE statements
        conn = sqlite3.connect(f"file:{neighbour}?mode=ro", uri=True)
        try:
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            conn.close()
        # at most max_rows a table, plus the copies a duplicates neighbour adds
        assert all(n <= 50 + 50 // 4 for n in _counts(neighbour).values())
        assert not neighbour.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    sizes = [sum(_counts(p).values()) for p in made]
    assert min(sizes) <= len(_counts(path)) * 2  # a tiny one: a row or two a table, some empty
    assert max(sizes) > 2 * min(sizes)


def test_neighbours_are_the_same_for_the_same_seed_and_differ_for_another(shop: Path, tmp_path: Path) -> None:
    one = generate_neighbours(shop, tmp_path / "a", 4, seed=11)
    again = generate_neighbours(shop, tmp_path / "b", 4, seed=11)
    other = generate_neighbours(shop, tmp_path / "c", 4, seed=12)
    assert _digest(one) == _digest(again)
    assert _digest(one) != _digest(other)
    rewritten = generate_neighbours(shop, tmp_path / "a", 4, seed=11)  # over read-only files of its own
    assert _digest(rewritten) == _digest(one)


def test_the_gold_s_literals_and_their_neighbours_appear_in_some_neighbour(shop: Path, tmp_path: Path) -> None:
    made = generate_neighbours(shop, tmp_path / "n", len(FLAVOURS), seed=5, literals={"age": [30]})
    ages: set[int | None] = set()
    for path in made:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        ages |= {a for (a,) in conn.execute("SELECT age FROM customer")}
        conn.close()
    assert {29, 30, 31} <= ages  # on the boundary and one either side, never in the source
    assert None in ages


def test_distillation_keeps_neighbours_that_tell_near_misses_apart(shop: Path, tmp_path: Path) -> None:
    golds = [
        GoldQuery("older", "SELECT name FROM customer WHERE age >= 30"),
        GoldQuery("by_region", "SELECT r.name, COUNT(DISTINCT c.id) FROM region AS r JOIN customer AS c "
                               "ON c.region_id = r.id GROUP BY r.name"),
    ]
    pool = generate_neighbours(shop, tmp_path / "n", 16, seed=2, literals={"age": [30]})
    result = distill(golds, shop, pool, keep=4)
    made = result.mutants
    older = [m.sql for m in made["older"]]
    boundary = older.index("SELECT name FROM customer WHERE age > 30")
    # no age is 30 in the source: only a neighbour tells > from >=
    assert ("older", boundary) not in result.on_original
    assert any(("older", boundary) in s for s in result.by_neighbour.values())
    # COUNT(c.id) for COUNT(DISTINCT c.id) over a key cannot differ anywhere: possibly equivalent, not a miss
    plain = [m.sql for m in made["by_region"]].index(
        "SELECT r.name, COUNT(c.id) FROM region AS r JOIN customer AS c ON c.region_id = r.id GROUP BY r.name")
    assert ("by_region", plain) in result.possibly_equivalent
    assert 1 <= len(result.kept) <= 4
    assert result.separated == result.separable  # every mutant some candidate separates is separated by a kept one


def test_a_unique_index_refuses_a_duplicated_row_instead_of_breaking_the_neighbour(tmp_path: Path) -> None:
    path = tmp_path / "users.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL);"
                       "CREATE UNIQUE INDEX users_email ON users (email);"
                       "CREATE VIEW user_emails AS SELECT email FROM users;")
    conn.executemany("INSERT INTO users VALUES (?, ?)", [(i, f"u{i}@x") for i in range(1, 40)])
    conn.commit()
    conn.close()
    made = generate_neighbours(path, tmp_path / "n", len(FLAVOURS), seed=1)
    for neighbour in made:
        assert _schema(neighbour) == _schema(path)
        check = sqlite3.connect(f"file:{neighbour}?mode=ro", uri=True)
        emails = [e for (e,) in check.execute("SELECT email FROM user_emails")]
        check.close()
        assert len(emails) == len(set(emails))


@pytest.mark.parametrize(("literal", "values", "expected"), [
    ("2004-01-01", ["2003-05-01 00:00:00", "2002-08-14 00:00:00"], "2004-01-01 00:00:00"),  # completed
    ("2004-01-01", ["2003-05-01", "2002-08-14"], "2004-01-01"),  # already the column's shape
    ("Rock", ["Jazz", "Heavy Metal", "Blues"], "Rock"),  # free text: as it is
    ("2004", ["2003-05-01", "2002-08-14"], "2004-05-01"),
    ("abc", ["12-34", "56-78"], None),  # cannot be written in that column's format
    ("x", [], "x"),
])
def test_a_string_literal_is_written_in_the_column_s_own_format(literal: str, values: list[str],
                                                                  expected: str | None) -> None:
    from nl2sql_assets.evaluation.neighbours.formats import in_format

    assert in_format(literal, values) == expected


def test_a_near_miss_that_passes_on_the_original_is_overturned_on_a_neighbour_with_evidence(
        shop: Path, tmp_path: Path) -> None:
    from nl2sql_assets.evaluation.neighbours import FAILS_ON_NEIGHBOUR, neighbour_verdict

    gold = GoldQuery("older", "SELECT name FROM customer WHERE age >= 30")
    pool = generate_neighbours(shop, tmp_path / "n", 16, seed=2, literals={"age": [30]})
    kept = [pool[i] for i in distill([gold], shop, pool, keep=4).kept]
    near_miss = neighbour_verdict(gold, "SELECT name FROM customer WHERE age > 30", shop, kept)
    assert near_miss.passed_original and not near_miss.passed
    assert near_miss.reason == FAILS_ON_NEIGHBOUR and near_miss.neighbour is not None
    assert near_miss.gold_rows != near_miss.predicted_rows
    same = neighbour_verdict(gold, "SELECT c.name AS name FROM customer AS c WHERE NOT c.age < 30", shop, kept)
    assert same.passed and same.reason is None
    wrong = neighbour_verdict(gold, "SELECT name FROM customer", shop, kept)
    assert not wrong.passed_original and wrong.reason is None  # failing on the original is no overturn


def test_on_chinook_the_kept_neighbours_separate_the_mutants_and_overturn_no_equivalent_rewrite(
        chinook_path: Path, tmp_path: Path) -> None:
    import sqlglot

    from nl2sql_assets.evaluation.neighbours import gold_literals, neighbour_verdict
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import chinook_suite_path

    cases = [c for c in load_suite(chinook_suite_path()).cases if c.sql]
    golds = [GoldQuery(c.id, c.sql, c.order_matters, tuple(c.alt_sql)) for c in cases]
    pool = generate_neighbours(chinook_path, tmp_path / "n", 24, seed=1,
                               literals=gold_literals([g.sql for g in golds]))
    result = distill(golds, chinook_path, pool, keep=10)
    assert len(result.kept) <= 10
    assert result.separated >= 0.99 * result.separable
    assert result.separated > len(result.on_original)  # the neighbours add what the original misses
    kept = [pool[i] for i in result.kept]
    for gold in golds:
        rewrites = [*gold.alternatives]
        tree = sqlglot.parse_one(gold.sql, read="sqlite")
        if isinstance(tree, sqlglot.exp.Select):  # every output column aliased: the same rows
            tree.set("expressions", [e if isinstance(e, sqlglot.exp.Alias) else e.as_(f"c{n}")
                                     for n, e in enumerate(tree.expressions)])
            rewrites.append(tree.sql("sqlite"))
        for sql in rewrites:
            verdict = neighbour_verdict(gold, sql, chinook_path, kept)
            assert verdict.passed, (gold.key, sql, verdict.neighbour)


def test_a_foreign_key_sqlite_cannot_enforce_is_left_unenforced_as_in_the_source(tmp_path: Path) -> None:
    """Spider's car_1: a reference to a column that is neither a key nor unique ("foreign key
    mismatch" once enforced). The source never enforced it; its neighbours do not either."""
    path = tmp_path / "cars.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE model_list (id INTEGER PRIMARY KEY, model TEXT);"
                       "CREATE TABLE car_names (make_id INTEGER PRIMARY KEY, model TEXT REFERENCES model_list (model));")
    conn.executemany("INSERT INTO model_list VALUES (?, ?)", [(i, f"m{i % 3}") for i in range(1, 10)])
    conn.executemany("INSERT INTO car_names VALUES (?, ?)", [(i, f"m{i % 3}") for i in range(1, 20)])
    conn.commit()
    conn.close()
    made = generate_neighbours(path, tmp_path / "n", 3, seed=1)
    assert [sum(_counts(p).values()) > 0 for p in made] == [True, True, True]
    assert all(_schema(p) == _schema(path) for p in made)


def test_two_processes_making_one_set_at_once_both_get_one_whole_set(shop: Path, tmp_path: Path) -> None:
    """Shard workers and parallel partitions may build the same set together: whoever finishes
    second takes the set already in place, and it is whole."""
    from concurrent.futures import ProcessPoolExecutor

    from nl2sql_assets.evaluation.neighbours.store import read_set

    golds = [GoldQuery("older", "SELECT name FROM customer WHERE age >= 30")]
    with ProcessPoolExecutor(max_workers=2) as pool:
        homes = list(pool.map(_make_set, [(shop, golds, tmp_path / "sets")] * 2))
    assert homes[0] == homes[1]
    made = read_set(Path(homes[0]))
    assert made is not None and all(p.is_file() for p in made.paths)
    assert [p.name for p in (tmp_path / "sets" / "shop").iterdir()] == [Path(homes[0]).name]  # no leftovers


def _make_set(args: tuple[Path, list[GoldQuery], Path]) -> str:
    from nl2sql_assets.config import DatasourceConfig, NeighbourSettings
    from nl2sql_assets.evaluation.neighbours.store import neighbour_set

    source, golds, folder = args
    kept = neighbour_set(DatasourceConfig(id="shop", engine="sqlite", path=source), golds, folder,
                         NeighbourSettings(count=3, candidates=6), workers=1)
    return str(kept.home)
