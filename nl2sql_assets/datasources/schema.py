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


class ForeignKey(StrictModel):
    columns: list[str]
    ref_table: str
    ref_columns: list[str]


class TableInfo(StrictModel):
    name: str
    columns: list[ColumnInfo]
    primary_key: list[str] = Field(default_factory=list)
    foreign_keys: list[ForeignKey] = Field(default_factory=list)

    def column(self, name: str) -> ColumnInfo | None:
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
    _fingerprint: str | None = PrivateAttr(default=None)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> SchemaSnapshot:
        copy = super().model_copy(update=update, deep=deep)
        copy._fingerprint = None  # a copy with other tables is another schema
        return copy

    def table(self, name: str) -> TableInfo | None:
        """Case-insensitive lookup, as SQLite and DuckDB resolve identifiers."""
        low = name.lower()
        return next((t for t in self.tables if t.name.lower() == low), None)

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
