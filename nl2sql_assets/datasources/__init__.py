"""Datasources: read-only adapters for SQLite and DuckDB, the registry, schema snapshots and Chinook.

The adapters (DuckDB's is heavy) and Chinook's fetcher are loaded on first use so that importing
this package stays cheap. The demo databases are ``nl2sql_assets.demo``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nl2sql_assets.datasources.base import (
    DatasourceAdapter,
    DatasourceError,
    QueryFailed,
    QueryOutput,
    QueryTimeout,
    ReadOnlyViolation,
)
from nl2sql_assets.datasources.guard import check_read_only
from nl2sql_assets.datasources.registry import DatasourceRegistry, open_adapter
from nl2sql_assets.datasources.schema import ColumnInfo, ForeignKey, SchemaSnapshot, TableInfo
from nl2sql_assets.datasources.values import normalise_rows, normalise_value

if TYPE_CHECKING:
    from nl2sql_assets.datasources.chinook import CHINOOK_SHA256, CHINOOK_URL, ChinookError, resolve_chinook
    from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter
    from nl2sql_assets.datasources.sqlite import SqliteAdapter

_LAZY = {
    "SqliteAdapter": "nl2sql_assets.datasources.sqlite",
    "DuckDBAdapter": "nl2sql_assets.datasources.duckdb_adapter",
    "CHINOOK_URL": "nl2sql_assets.datasources.chinook",
    "CHINOOK_SHA256": "nl2sql_assets.datasources.chinook",
    "ChinookError": "nl2sql_assets.datasources.chinook",
    "resolve_chinook": "nl2sql_assets.datasources.chinook",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CHINOOK_SHA256",
    "CHINOOK_URL",
    "ChinookError",
    "ColumnInfo",
    "DatasourceAdapter",
    "DatasourceError",
    "DatasourceRegistry",
    "DuckDBAdapter",
    "ForeignKey",
    "QueryFailed",
    "QueryOutput",
    "QueryTimeout",
    "ReadOnlyViolation",
    "SchemaSnapshot",
    "SqliteAdapter",
    "TableInfo",
    "check_read_only",
    "normalise_rows",
    "normalise_value",
    "open_adapter",
    "resolve_chinook",
]
