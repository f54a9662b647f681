"""SQLite databases built from a benchmark's schema list (Spider's ``tables.json``), for when the
databases themselves are not at hand: schema-only, or with small generated rows.

``build_databases`` writes ``<out>/database/<db_id>/<db_id>.sqlite`` for every schema listed (the
layout ``bench import`` reads), with each table's columns, declared types, primary keys and
foreign keys as the list gives them. With ``rows > 0`` every table gets that many rows,
deterministically from ``seed``:

* primary keys are unique; a foreign key takes values of the column it references (tables are
  filled parents first), so joins meet;
* other values come from small pools, so filters, GROUP BY and DISTINCT see ties and repeats:
  the literals the questions' gold SQL compares each column with (``WHERE Airline = 'JetBlue'``
  then matches rows), numbers, words, dates and booleans by the column's type, and a NULL now
  and then where the column is not a key.

A generated database is a place where gold SQL and predictions can be run side by side and
graded by any grader; its rows are not the benchmark's, so its accuracy is not the benchmark's.
"""

from __future__ import annotations

import json
import random
import sqlite3
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from nl2sql_assets.errors import UserError

_TYPES = {"number": "INTEGER", "text": "TEXT", "time": "TEXT", "boolean": "BOOLEAN", "others": "TEXT"}


class SchemaListError(UserError, ValueError):
    """A schema list (tables.json) that cannot be built; names the file, the entry and the field."""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_schema_list(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SchemaListError(f"{path}: schema list not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaListError(f"{path}: cannot read the schema list: {exc}") from None
    if not isinstance(data, list):
        raise SchemaListError(f"{path}: the schema list is a JSON list of databases, not a {type(data).__name__}")
    for index, entry in enumerate(data):
        for key in ("db_id", "table_names_original", "column_names_original", "column_types"):
            if not isinstance(entry, dict) or key not in entry:
                raise SchemaListError(f"{path}: entry {index}: field {key!r}: missing")
    return data


def gold_literals(questions: list[dict[str, Any]], sql_key: str = "query") -> dict[str, dict[str, list[Any]]]:
    """db_id -> column name (lower-cased) -> the literals the gold SQL compares that column with."""
    import sqlglot
    from sqlglot import exp

    found: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for entry in questions:
        sql, db_id = entry.get(sql_key), entry.get("db_id")
        if not isinstance(sql, str) or not isinstance(db_id, str):
            continue
        try:
            tree = sqlglot.parse_one(sql, read="sqlite")
        except Exception:  # a statement sqlglot cannot read gives no literals; the database still runs it
            continue
        for node in tree.find_all(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.In):
            left = node.this
            values = node.expressions if isinstance(node, exp.In) else [node.expression]
            if not isinstance(left, exp.Column):
                continue
            for value in values:
                literal = _literal(value)
                if literal is not None:
                    found[db_id][left.name.lower()].append(literal)
    return {db: dict(cols) for db, cols in found.items()}


def _literal(node: Any) -> Any:
    from sqlglot import exp

    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this.strip("%")
        try:
            number = float(node.this)
        except ValueError:
            return None
        return int(number) if number.is_integer() else number
    if isinstance(node, exp.Column) and node.this.quoted:  # SQLite's "double-quoted" string
        return node.name
    if isinstance(node, exp.Neg):
        inner = _literal(node.this)
        return -inner if isinstance(inner, int | float) else None
    return None


def build_databases(tables: str | Path, out: str | Path, *, rows: int = 0, seed: int = 0,
                    questions: str | Path | None = None, db_ids: set[str] | None = None) -> dict[str, Path]:
    """Write one SQLite file per schema of ``tables`` (``db_ids``: only these) under ``out``;
    ``questions`` (e.g. dev.json) lends the gold SQL's literals to the generated rows."""
    schemas = read_schema_list(tables)
    literals = gold_literals(json.loads(Path(questions).read_text(encoding="utf-8-sig"))) if questions else {}
    written: dict[str, Path] = {}
    for entry in schemas:
        db_id = entry["db_id"]
        if db_ids is not None and db_id not in db_ids:
            continue
        path = Path(out) / "database" / db_id / f"{db_id}.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".partial")
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        try:
            _SchemaBuild(entry, literals.get(db_id, {}), rows, random.Random(zlib.crc32(f"{seed}:{db_id}".encode()))
                         ).write(conn)
            conn.commit()
        finally:
            conn.close()
        tmp.replace(path)
        written[db_id] = path
    return written


class _SchemaBuild:
    """One database of the schema list: its DDL, then its rows."""

    def __init__(self, entry: dict[str, Any], literals: dict[str, list[Any]], rows: int, rng: random.Random) -> None:
        self.tables: list[str] = list(entry["table_names_original"])
        self.types: list[str] = list(entry["column_types"])
        self.columns: dict[int, list[tuple[int, str]]] = defaultdict(list)  # table -> (column index, name)
        for index, (table, name) in enumerate(entry["column_names_original"]):
            if table >= 0:
                self.columns[table].append((index, name))
        self.owner = {index: table for index, (table, _) in enumerate(entry["column_names_original"])}
        self.keys: dict[int, list[int]] = defaultdict(list)
        for key in entry.get("primary_keys", []):
            for column in key if isinstance(key, list) else [key]:
                self.keys[self.owner[column]].append(column)
        self.refs: dict[int, int] = {}  # column -> the column it references
        for src, dst in entry.get("foreign_keys", []):
            if src != dst:
                self.refs[src] = dst
        self.literals = literals
        self.rows = rows
        self.rng = rng
        self.values: dict[int, list[Any]] = {}  # column -> the values written

    def skipped(self, table: int) -> bool:
        return self.tables[table].lower().startswith("sqlite_") or not self.columns.get(table)

    def write(self, conn: sqlite3.Connection) -> None:
        for table in range(len(self.tables)):
            if not self.skipped(table):
                conn.execute(self.ddl(table))
        if self.rows <= 0:
            return
        for table in self.fill_order():
            columns = self.columns[table]
            data = self.table_rows(table)
            names = ", ".join(_quote(n) for _, n in columns)
            conn.executemany(f"INSERT INTO {_quote(self.tables[table])} ({names}) VALUES "
                             f"({', '.join('?' * len(columns))})", data)

    def ddl(self, table: int) -> str:
        parts = [f"{_quote(name)} {_TYPES.get(self.types[i], 'TEXT')}" for i, name in self.columns[table]]
        names = dict(self.columns[table])
        keys = [names[k] for k in self.keys.get(table, []) if k in names]
        if keys:
            parts.append(f"PRIMARY KEY ({', '.join(_quote(k) for k in keys)})")
        for src, dst in self.refs.items():
            if self.owner[src] == table and not self.skipped(self.owner[dst]):
                ref_name = dict(self.columns[self.owner[dst]])[dst]
                parts.append(f"FOREIGN KEY ({_quote(names[src])}) REFERENCES "
                             f"{_quote(self.tables[self.owner[dst]])} ({_quote(ref_name)})")
        return f"CREATE TABLE {_quote(self.tables[table])} ({', '.join(parts)})"

    def fill_order(self) -> list[int]:
        """Tables parents first (a cycle is broken where it is met)."""
        order: list[int] = []
        state: dict[int, int] = {}

        def visit(table: int) -> None:
            if state.get(table):
                return
            state[table] = 1
            for src, dst in self.refs.items():
                if self.owner[src] == table and self.owner[dst] != table and not self.skipped(self.owner[dst]):
                    visit(self.owner[dst])
            state[table] = 2
            order.append(table)

        for table in range(len(self.tables)):
            if not self.skipped(table):
                visit(table)
        return order

    def table_rows(self, table: int) -> list[list[Any]]:
        columns = self.columns[table]
        keys = set(self.keys.get(table, []))
        single_key = len(keys) == 1
        out: list[list[Any]] = []
        seen: set[tuple[Any, ...]] = set()
        for row_index in range(self.rows * 3):
            if len(out) >= self.rows:
                break
            row = []
            for column, _name in columns:
                if single_key and column in keys and column not in self.refs:
                    row.append(self.key_value(column, row_index))
                else:
                    row.append(self.value(column, nullable=column not in keys))
            key = tuple(v for (c, _), v in zip(columns, row, strict=True) if c in keys)
            if keys and key in seen:
                continue
            seen.add(key)
            out.append(row)
        for position, (column, _) in enumerate(columns):
            self.values[column] = [r[position] for r in out]
        return out

    def key_value(self, column: int, row_index: int) -> Any:
        if self.types[column] == "number":
            return row_index + 1
        pool = self.pool(column)
        return pool[row_index] if row_index < len(pool) else f"{pool[0] if pool else 'k'}_{row_index + 1}"

    def value(self, column: int, *, nullable: bool) -> Any:
        if column in self.refs:
            parent = self.values.get(self.refs[column])
            if parent:
                return self.rng.choice(parent)
        if nullable and self.rng.random() < 0.05:
            return None
        return self.rng.choice(self.pool(column))

    def pool(self, column: int) -> list[Any]:
        name = dict(self.columns[self.owner[column]])[column]
        kind = self.types[column]
        found = [v for v in self.literals.get(name.lower(), [])
                 if (kind == "number") == isinstance(v, int | float)]
        if kind == "number":
            base: list[Any] = [1, 2, 3, 4, 5, 10, 20, 30, 50, 100, 1000, 2000]
        elif kind == "time":
            base = ["2001-01-05", "2010-06-30", "2015-12-01 10:00:00", "2020-02-29", "1999-12-31"]
        elif kind == "boolean":
            base = ["T", "F", 0, 1]
        else:
            base = [f"{name} {w}" for w in ("alpha", "beta", "gamma", "delta", "epsilon")]
        return list(dict.fromkeys(found)) + base
