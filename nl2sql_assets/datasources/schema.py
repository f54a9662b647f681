"""Schema snapshots: what a datasource holds, and a fingerprint that ties gold rows to it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr

from nl2sql_assets.config import StrictModel


class ColumnInfo(StrictModel):
    name: str
    type: str
    nullable: bool = True
    primary_key: bool = False
    #: the database's own comment on the column (a server's catalog), read as its description
    description: str | None = Field(default=None, exclude_if=lambda v: v is None)


class ForeignKey(StrictModel):
    columns: list[str]
    ref_table: str
    ref_columns: list[str]


class TableInfo(StrictModel):
    name: str
    columns: list[ColumnInfo]
    primary_key: list[str] = Field(default_factory=list)
    foreign_keys: list[ForeignKey] = Field(default_factory=list)
    #: the database's own comment on the table (a server's catalog), read as its description
    description: str | None = Field(default=None, exclude_if=lambda v: v is None)

    def column(self, name: str, exact: bool = False) -> ColumnInfo | None:
        """The column called ``name``: without regard to case (SQLite, DuckDB, MySQL), or, where
        ``exact`` (Postgres, whose unquoted names are folded before they are looked up), as spelled."""
        if exact:
            return next((c for c in self.columns if c.name == name), None)
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)


class SchemaSnapshot(StrictModel):
    """Tables, columns, types and keys of one datasource, in a stable order. A snapshot is a value:
    its adapter builds it once and nothing changes it (fields cannot be reassigned), so its
    fingerprint is worked out once (every routed question asks for it, six times on the wide bed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    datasource_id: str
    engine: str
    tables: list[TableInfo]
    #: a server datasource's schemas, in the order names resolve in (its search path); its first
    #: schema's tables are named alone, the others' ``schema.table``
    schemas: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    #: names are matched as spelled (Postgres folds unquoted names to lower case before looking
    #: them up, and matches quoted ones exactly); else without regard to case
    exact_names: bool = Field(default=False, exclude_if=lambda v: not v)
    _fingerprint: str | None = PrivateAttr(default=None)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> SchemaSnapshot:
        copy = super().model_copy(update=update, deep=deep)
        copy._fingerprint = None  # a copy with other tables is another schema
        return copy

    def table(self, name: str) -> TableInfo | None:
        """The table a name written without quotes means: looked up without regard to case (SQLite,
        DuckDB and MySQL resolve so; Postgres folds such a name to lower case, as its own tables'
        names usually are). Plans, retrieval and the validator name tables so."""
        low = name.lower()
        return next((t for t in self.tables if t.name.lower() == low), None)

    def named(self, name: str) -> TableInfo | None:
        """The table a name means once the database's own rules have normalised it (the final-SQL
        check's names, after sqlglot folded unquoted ones in the dialect): as spelled where the
        snapshot's names are exact (Postgres), else without regard to case."""
        if self.exact_names:
            return next((t for t in self.tables if t.name == name), None)
        return self.table(name)

    @property
    def own_schemas(self) -> frozenset[str]:
        """The schema names a table reference may carry and still name one of the snapshot's
        tables by its own name: none, ``main`` (SQLite, DuckDB), or a server's first schema."""
        return frozenset({"", "main"} if not self.schemas else {"", self.schemas[0].lower()})

    @property
    def table_names(self) -> list[str]:
        return [t.name for t in self.tables]

    @property
    def column_count(self) -> int:
        return sum(len(t.columns) for t in self.tables)

    def markdown_table(self) -> str:
        """The tables as a Markdown table: name, number of columns, primary key."""
        rows = "\n".join(f"| {t.name} | {len(t.columns)} | {', '.join(t.primary_key)} |" for t in self.tables)
        return "| table | columns | primary key |\n|---|---|---|\n" + rows

    def fingerprint(self) -> str:
        """SHA-256 over tables, columns, types and keys, sorted, so re-introspection keeps it."""
        if self._fingerprint is None:
            self._fingerprint = self._work_out_fingerprint()
        return self._fingerprint

    def _work_out_fingerprint(self) -> str:
        canon = [
            {
                "name": t.name,
                "columns": sorted(
                    ([c.name, c.type.upper(), c.nullable, c.primary_key] for c in t.columns), key=lambda c: c[0]
                ),
                "pk": list(t.primary_key),
                "fks": sorted([fk.columns, fk.ref_table, fk.ref_columns] for fk in t.foreign_keys),
            }
            for t in sorted(self.tables, key=lambda t: t.name)
        ]
        blob = json.dumps({"engine": self.engine, "tables": canon}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()
