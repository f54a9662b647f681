"""Neighbour databases of a SQLite or DuckDB datasource: the same tables, types and constraints
(its own CREATE statements), a few hundred rows a table at most, drawn from the real rows and
pushed to the edges that near-miss SQL falls over: values on and beside each column's boundaries
and the gold's own literals, duplicated rows, ties, empty strings, NULL where a column allows it,
one-row and empty tables. Primary keys stay unique, foreign keys point at rows that are there,
NOT NULL and CHECK hold (the database itself refuses a row that breaks one, and such a row is
left out). Reading and writing the files is the engine's ``formats`` object.

Deterministic: the same source, seed and literals give byte-for-byte the same files. Each file is
written whole (a temporary file renamed) and left read-only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nl2sql_assets.evaluation.neighbours.formats import (
    Column,
    Source,
    Table,
    format_of,
    in_format,
    moment_of,
    pool_size,
    shifted,
    side_by_side,
)
from nl2sql_assets.forking import process_pool

#: Bumped whenever the same inputs could give other databases: part of what a neighbour's rows depend on.
#: 4: targeted candidates built from the gold's own trees (``targeted_neighbours``) beside the drawn ones;
#: 5: a compared value now and then written into every row of its column.
GENERATOR_VERSION = 5
#: The kinds of neighbour, dealt in turn: each leans on one way near-miss SQL is told apart.
FLAVOURS = ("sample", "boundaries", "duplicates", "nulls", "tiny", "sample", "boundaries", "ties")


def _edges(values: Sequence[Any], column: Column, literals: Sequence[Any]) -> list[Any]:
    """The values near-miss SQL is told apart on: the column's min and max and one beside each,
    the gold's literals and one beside each (numbers; dates and times, as DuckDB gives them), an
    empty string and a repeated value (text)."""
    present = [v for v in values if v is not None]
    numbers = [v for v in present if isinstance(v, int | float | decimal.Decimal) and not isinstance(v, bool)]
    moments = [v for v in present if isinstance(v, dt.date)]
    out: list[Any] = []
    if column.numeric or (numbers and len(numbers) == len(present)):
        shown = [v for v in literals if isinstance(v, int | float) and not isinstance(v, bool)]
        for v in [*([min(numbers), max(numbers)] if numbers else []), *shown]:
            out += [v, shifted(v, -1), shifted(v, 1)]
        if column.checked and numbers:  # a CHECK would refuse the row: stay within the real range
            out = [v for v in out if min(numbers) <= v <= max(numbers)]
        return [int(v) for v in out] if column.integer else out
    if moments and len(moments) == len(present) and len({type(v) for v in moments}) == 1:
        kind = type(moments[0])
        shown = [m for m in (moment_of(v, kind) for v in literals) if m is not None]
        for v in [min(moments), max(moments), *shown]:
            out += [v, shifted(v, -1), shifted(v, 1)]
        return [v for v in out if min(moments) <= v <= max(moments)] if column.checked else out
    texts = [v for v in present if isinstance(v, str)]
    # a number compared with a text column is compared as text (SQLite's affinity): it and one either side
    spelled = [str(w) for v in literals if isinstance(v, int | float) and not isinstance(v, bool)
               for w in (v, shifted(v, -1), shifted(v, 1))]
    out += [f for f in (in_format(v, texts) for v in [*(v for v in literals if isinstance(v, str)), *spelled])
            if f is not None]
    out += [""] if not column.not_null and len(texts) == len(present) else []
    out += present[:1]
    return out


def _neighbour_rows(tables: list[Table], flavour: str, rng: random.Random, max_rows: int,
                    literals: Mapping[str, Sequence[Any]]) -> dict[str, list[tuple[Any, ...]]]:
    """Each table's rows for one neighbour; foreign keys re-pointed at rows kept in the parent."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    by_name = {t.name: t for t in tables}
    for table in tables:
        source = list(table.rows)
        if flavour == "tiny":
            size = min(len(source), rng.choice((0, 1, 1, 2)))
        else:
            size = min(len(source), rng.randint(max(1, max_rows // 8), max_rows))
        rows = [list(r) for r in rng.sample(source, size)] if size else []
        for column_index, column in enumerate(table.columns):
            if column.primary_key or column.name in table.references:
                continue
            edges = _edges([r[column_index] for r in source], column,
                           literals.get(column.name.lower(), ()))
            chance = {"boundaries": 0.5, "ties": 0.0, "sample": 0.1}.get(flavour, 0.15)
            for row in rows:
                if edges and rng.random() < chance:
                    row[column_index] = rng.choice(edges)
                if flavour == "nulls" and not column.not_null and rng.random() < 0.3:
                    row[column_index] = None
            if flavour == "ties" and rows and rng.random() < 0.5:
                tie = rng.choice(rows)[column_index]
                for row in rng.sample(rows, max(1, len(rows) // 3)):
                    row[column_index] = tie
        if flavour in ("duplicates", "ties") and rows:
            rows += _copies(table, rows, rng)
        _repoint(table, rows, out, by_name, rng)
        out[table.name] = [tuple(r) for r in rows]
    return out


def _copies(table: Table, rows: list[list[Any]], rng: random.Random) -> list[list[Any]]:
    """Copies of some rows under fresh integer keys: what DISTINCT and COUNT(DISTINCT) tell apart."""
    keys = [i for i, c in enumerate(table.columns) if c.primary_key]
    if len(keys) > 1 or (keys and not table.columns[keys[0]].integer):
        return []
    next_key = max((r[keys[0]] for r in rows if isinstance(r[keys[0]], int)), default=0) + 1 if keys else 0
    copies = []
    for row in rng.sample(rows, max(1, len(rows) // 4)):
        copy = list(row)
        if keys:
            copy[keys[0]] = next_key
            next_key += 1
        copies.append(copy)
    return copies


def _repoint(table: Table, rows: list[list[Any]], kept: Mapping[str, list[tuple[Any, ...]]],
             by_name: Mapping[str, Table], rng: random.Random) -> None:
    """Foreign keys pointed at parent rows this neighbour keeps (NULL where allowed and there is none)."""
    for column, (parent, parent_column) in table.references.items():
        i = table.index(column)
        keep_null = not table.columns[i].not_null
        if parent == table.name:  # a self-reference: to a row inserted before this one, or NULL
            key = table.index(parent_column)
            earlier: list[Any] = []
            for row in rows:
                if row[i] is not None and row[i] not in earlier:
                    row[i] = rng.choice(earlier) if earlier and (not keep_null or rng.random() < 0.7) else None
                earlier.append(row[key])
            continue
        if parent in kept:
            pool = [r[by_name[parent].index(parent_column)] for r in kept[parent]]
        else:
            continue
        for row in rows:
            if row[i] is None and keep_null:
                continue
            if row[i] not in pool:
                row[i] = rng.choice(pool) if pool else None


def generate_neighbours(source: Path, folder: Path, count: int, seed: int, *, max_rows: int = 200,
                        literals: Mapping[str, Sequence[Any]] | None = None, engine: str = "sqlite",
                        read: Source | None = None, workers: int | None = None) -> list[Path]:
    """``count`` neighbours of the database file ``source`` (``engine``: sqlite or duckdb) in
    ``folder`` (``neighbour_00.sqlite``, ...), written on every core (``workers``). ``literals``:
    column name (lower case) -> values the gold SQL compares it with; ``read``: the source as
    ``formats`` reads it, where the caller has it."""
    files = format_of(engine)
    tables = read if read is not None else files.read(source, max_rows)
    tasks = [(tables, folder, n, seed, max_rows, literals or {}, engine) for n in range(count)]
    workers = max(1, workers if workers is not None else pool_size(count))
    if workers == 1 or count < 4:
        return [write_one(*task) for task in tasks]
    with process_pool(workers) as pool:  # each neighbour from its own random stream
        return list(pool.map(_write_task, tasks))


def _write_task(task: tuple[Any, ...]) -> Path:
    return write_one(*task)


def write_one(source: Source, folder: Path, n: int, seed: int, max_rows: int,
              literals: Mapping[str, Sequence[Any]], engine: str) -> Path:
    """Neighbour ``n`` of a set: its rows drawn from its own random stream, its file written."""
    files = format_of(engine)
    rng = random.Random(f"{GENERATOR_VERSION}:{seed}:{n}")
    rows = _neighbour_rows(source.tables, FLAVOURS[n % len(FLAVOURS)], rng, max_rows, literals)
    target = folder / f"neighbour_{n:02d}{files.suffix}"
    if target.exists():
        target.chmod(0o644)
        target.unlink()
    return files.write(source, rows, target)


def gold_literals(sqls: Sequence[str], dialect: str = "sqlite") -> dict[str, list[Any]]:
    """Column name (lower case) -> the values gold SQL compares it with (``x > 30``, ``name = 'Rock'``,
    ``x BETWEEN 1 AND 5``, ``x IN (...)``): the boundaries a neighbour should hold."""
    import sqlglot
    from sqlglot import exp

    def value(node: exp.Expression) -> Any:
        if not isinstance(node, exp.Literal):
            return None
        if node.is_string:
            return node.this
        number = float(node.this)
        return int(number) if number.is_integer() else number

    out: dict[str, list[Any]] = {}
    for sql in sqls:
        try:
            tree = sqlglot.parse_one(sql, read=dialect)
        except sqlglot.errors.SqlglotError:
            continue  # a gold the reader cannot parse gives no literal (the gold audit flags it)
        for node in tree.find_all(exp.Predicate):
            column = node.this if isinstance(node.this, exp.Column) else None
            if column is None:
                continue
            found = [node.args.get(k) for k in ("expression", "low", "high")] + list(node.args.get("expressions") or [])
            for literal in found:
                v = value(literal) if literal is not None else None
                if v is not None and v not in out.setdefault(column.name.lower(), []):
                    out[column.name.lower()].append(v)
    return out


def targeted_neighbours(source: Path, folder: Path, sqls: Sequence[str], count: int, seed: int, *,
                        start: int = 0, max_rows: int = 200, engine: str = "sqlite",
                        read: Source | None = None) -> list[Path]:
    """Up to ``count`` candidate neighbours built for what the gold queries ``sqls`` lean on
    (``targeted``): for each threshold on an aggregate, a group of exactly that size or one either
    side (the table's row cap does not apply to it); for each join, rows without a partner; ties at
    each LIMIT's cut; repeated values where DISTINCT, COUNT(DISTINCT) or GROUP BY reach; NULLs where
    a predicate reads. Golds are dealt round the candidates, each candidate built for its golds
    together; files are numbered from ``start`` (after the drawn candidates)."""
    from nl2sql_assets.evaluation.neighbours.focus import focus_of, merged
    from nl2sql_assets.evaluation.neighbours.targeted import build, ordered

    files = format_of(engine)
    foci = [f for f in (focus_of(sql, files.dialect) for sql in sqls) if f is not None and f.targets]
    made = min(count, len(foci))
    if not made:
        return []
    tables = read if read is not None else files.read(source, max_rows)

    def one(j: int) -> Path:
        focus = merged(foci[j::made])
        rng = random.Random(f"{GENERATOR_VERSION}:{seed}:targeted:{j}")
        rows = build(tables, focus, rng, ordered(focus.targets))
        target = folder / f"neighbour_{start + j:02d}{files.suffix}"
        if target.exists():
            target.chmod(0o644)
            target.unlink()
        return files.write(tables, rows, target)

    return side_by_side(files, one, range(made))  # a server's: written side by side (round trips)
