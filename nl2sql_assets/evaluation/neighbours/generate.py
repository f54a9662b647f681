"""Neighbour databases of a SQLite datasource: the same tables, types and constraints (its own
CREATE statements), a few hundred rows a table at most, drawn from the real rows and pushed to the
edges that near-miss SQL falls over: values on and beside each column's boundaries and the gold's
own literals, duplicated rows, ties, empty strings, NULL where a column allows it, one-row and
empty tables. Primary keys stay unique, foreign keys point at rows that are there, NOT NULL holds
(the database itself refuses a row that breaks one, and such a row is left out).

Deterministic: the same source, seed and literals give byte-for-byte the same files. Each file is
written whole (a temporary file renamed) and left read-only.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Bumped whenever the same inputs could give other databases: part of what a neighbour's rows depend on.
GENERATOR_VERSION = 1
#: The kinds of neighbour, dealt in turn: each leans on one way near-miss SQL is told apart.
FLAVOURS = ("sample", "boundaries", "duplicates", "nulls", "tiny", "sample", "boundaries", "ties")


@dataclass
class Column:
    name: str
    type: str
    not_null: bool
    primary_key: bool

    @property
    def numeric(self) -> bool:
        t = self.type.upper()
        return any(word in t for word in ("INT", "REAL", "NUM", "DEC", "FLOA", "DOUB"))

    @property
    def integer(self) -> bool:
        return "INT" in self.type.upper()


@dataclass
class Table:
    name: str
    create_sql: str
    columns: list[Column]
    #: column -> (parent table, parent column)
    references: dict[str, tuple[str, str]] = field(default_factory=dict)
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def index(self, column: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.name.lower() == column.lower())


def read_source(path: Path, max_rows: int) -> tuple[list[Table], list[str]]:
    """The tables of a SQLite file, parents before children, each with up to ``max_rows`` of its
    rows (the first by rowid: a fixed sample); and its other objects' CREATE statements (indexes,
    views, triggers)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        others = [sql for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type IN ('index', 'view', 'trigger') AND sql IS NOT NULL "
            "ORDER BY CASE type WHEN 'index' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, name")]
        tables: dict[str, Table] = {}
        for name, create_sql in conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"):
            columns = [Column(r[1], r[2] or "", bool(r[3]), bool(r[5]))
                       for r in conn.execute(f'PRAGMA table_info("{name}")')]
            table = Table(name, create_sql, columns)
            for r in conn.execute(f'PRAGMA foreign_key_list("{name}")'):
                parent, child_col, parent_col = r[2], r[3], r[4]
                table.references[child_col] = (parent, parent_col or "rowid")
            table.rows = [tuple(row) for row in conn.execute(f'SELECT * FROM "{name}" LIMIT {int(max_rows)}')]
            tables[name] = table
    finally:
        conn.close()
    return _parents_first(tables), others


def _parents_first(tables: Mapping[str, Table]) -> list[Table]:
    done: list[Table] = []
    seen: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in seen or name not in tables or name in path:
            return
        for parent, _ in tables[name].references.values():
            visit(parent, (*path, name))
        seen.add(name)
        done.append(tables[name])

    for name in sorted(tables):
        visit(name, ())
    return done


def _edges(values: Sequence[Any], column: Column, literals: Sequence[Any]) -> list[Any]:
    """The values near-miss SQL is told apart on: the column's min and max and one beside each,
    the gold's literals and one beside each (numbers), an empty string and a repeated value (text)."""
    present = [v for v in values if v is not None]
    out: list[Any] = []
    if column.numeric:
        numbers = [v for v in present if isinstance(v, int | float)]
        shown = [v for v in literals if isinstance(v, int | float)]
        for v in [*(([min(numbers), max(numbers)]) if numbers else []), *shown]:
            out += [v, v - 1, v + 1]
        if column.integer:
            out = [int(v) for v in out]
    else:
        texts = [v for v in present if isinstance(v, str)]
        out += [f for f in (_in_format(v, texts) for v in literals if isinstance(v, str)) if f is not None]
        out += [""] if not column.not_null else []
        out += present[:1]
    return out


def _shape(text: str) -> str:
    """'2003-01-01 00:00:00' -> '9999-99-99 99:99:99': what a column's values look like."""
    return re.sub(r"[A-Za-z]", "a", re.sub(r"\d", "9", text))


def _in_format(literal: str, values: Sequence[str]) -> str | None:
    """``literal`` as the column writes its values: as it is in a free-text column or where it has
    their shape; completed from a value that starts with its shape (a date compared with a column
    of datetimes becomes that datetime at midnight); None where it cannot be written that way."""
    shapes = {_shape(v) for v in values}
    if len(shapes) != 1 or _shape(literal) in shapes:
        return literal
    for value in values:
        if _shape(value).startswith(_shape(literal)):
            return literal + value[len(literal):]
    return None


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


def write_neighbour(tables: list[Table], others: Sequence[str], rows: Mapping[str, list[tuple[Any, ...]]],
                    path: Path) -> Path:
    """A SQLite file of ``tables``' schema holding ``rows``; rows a constraint refuses are left out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    conn = sqlite3.connect(temporary)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        for table in tables:
            conn.execute(table.create_sql)
        for sql in others:  # indexes first: a UNIQUE one refuses a row as the table's own keys do
            if sql.lstrip().upper().startswith(("CREATE INDEX", "CREATE UNIQUE INDEX")):
                conn.execute(sql)
        for table in tables:
            marks = ", ".join("?" for _ in table.columns)
            for row in rows.get(table.name, ()):
                try:
                    conn.execute(f'INSERT INTO "{table.name}" VALUES ({marks})', row)
                except sqlite3.IntegrityError:
                    continue  # a key taken twice, a NULL where none is allowed: the database says no
        for sql in others:  # views and triggers once the rows are in (no trigger fires on them)
            if not sql.lstrip().upper().startswith(("CREATE INDEX", "CREATE UNIQUE INDEX")):
                conn.execute(sql)
        conn.commit()
    finally:
        conn.close()
    temporary.chmod(0o444)
    os.replace(temporary, path)
    return path


def generate_neighbours(source: Path, folder: Path, count: int, seed: int, *, max_rows: int = 200,
                        literals: Mapping[str, Sequence[Any]] | None = None) -> list[Path]:
    """``count`` neighbours of the SQLite file ``source`` in ``folder`` (``neighbour_00.sqlite``,
    ...). ``literals``: column name (lower case) -> values the gold SQL compares it with."""
    tables, others = read_source(source, max_rows)
    paths = []
    for n in range(count):
        rng = random.Random(f"{GENERATOR_VERSION}:{seed}:{n}")
        rows = _neighbour_rows(tables, FLAVOURS[n % len(FLAVOURS)], rng, max_rows, literals or {})
        target = folder / f"neighbour_{n:02d}.sqlite"
        if target.exists():
            target.chmod(0o644)
            target.unlink()
        paths.append(write_neighbour(tables, others, rows, target))
    return paths


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
        for node in sqlglot.parse_one(sql, read=dialect).find_all(exp.Predicate):
            column = node.this if isinstance(node.this, exp.Column) else None
            if column is None:
                continue
            found = [node.args.get(k) for k in ("expression", "low", "high")] + list(node.args.get("expressions") or [])
            for literal in found:
                v = value(literal) if literal is not None else None
                if v is not None and v not in out.setdefault(column.name.lower(), []):
                    out[column.name.lower()].append(v)
    return out
