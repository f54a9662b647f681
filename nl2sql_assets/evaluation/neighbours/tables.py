"""The tables a neighbour database copies of its source, whatever the engine: each table's columns,
keys, references and sampled rows, and how a database file is written whole (a temporary file
renamed into place, left read-only)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Rows read from a query per database when telling results apart: enough, never a flood.
ROW_LIMIT = 2000
TIMEOUT_S = 5.0


@dataclass
class Column:
    name: str
    type: str
    not_null: bool
    primary_key: bool
    #: a CHECK constraint reads it (DuckDB says which columns): values stay in the column's own range
    checked: bool = False

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
    schema: str | None = None  # DuckDB: the schema, where it is not main
    #: how the engine quotes a name: '"' (SQL), '`' (MySQL)
    quote: str = '"'

    def index(self, column: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.name.lower() == column.lower())

    @property
    def quoted(self) -> str:
        q = self.quote
        name = q + self.name.replace(q, q + q) + q
        return f"{q}{self.schema}{q}.{name}" if self.schema else name


@dataclass
class Source:
    """What a neighbour copies of its source: the tables, parents before children, each with up
    to ``max_rows`` of its rows (a fixed sample: the first by rowid), and the other objects'
    CREATE statements (indexes are made before the rows, views after)."""

    tables: list[Table]
    indexes: list[str] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    schemas: list[str] = field(default_factory=list)  # DuckDB: schemas other than main
    #: a server's: the types its tables use (enums), made before the tables
    types: list[str] = field(default_factory=list)
    #: a server's: the foreign keys, added once every table is there
    constraints: list[str] = field(default_factory=list)
    #: a server's: where its neighbours are made (``servers.Scratch``)
    scratch: Any = None


def parents_first(tables: Mapping[str, Table]) -> list[Table]:
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


def _replace_into(temporary: Path, path: Path) -> Path:
    temporary.chmod(0o444)
    os.replace(temporary, path)
    return path


def _temporary(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    return temporary


