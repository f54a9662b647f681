"""Datasources: read-only adapters for SQLite and DuckDB, the registry, schema snapshots and demo data.

The adapters and the demo generator import DuckDB; they are loaded on first use so that importing
this package stays cheap.
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
    from nl2sql_assets.datasources.demo import (
        DEMO_POLICIES,
        SUPPORT_QUESTIONS,
        WEBANALYTICS_QUESTIONS,
        DemoError,
        DemoProject,
        ensure_demo_data,
        init_demo,
        render_evals_yaml,
        render_project_yaml,
    )
    from nl2sql_assets.datasources.duckdb_adapter import DuckDBAdapter
    from nl2sql_assets.datasources.sqlite import SqliteAdapter

_LAZY = {
    "SqliteAdapter": "nl2sql_assets.datasources.sqlite",
    "DuckDBAdapter": "nl2sql_assets.datasources.duckdb_adapter",
    "CHINOOK_URL": "nl2sql_assets.datasources.chinook",
    "CHINOOK_SHA256": "nl2sql_assets.datasources.chinook",
    "ChinookError": "nl2sql_assets.datasources.chinook",
    "resolve_chinook": "nl2sql_assets.datasources.chinook",
    "DEMO_POLICIES": "nl2sql_assets.datasources.demo",
    "SUPPORT_QUESTIONS": "nl2sql_assets.datasources.demo",
    "WEBANALYTICS_QUESTIONS": "nl2sql_assets.datasources.demo",
    "DemoError": "nl2sql_assets.datasources.demo",
    "DemoProject": "nl2sql_assets.datasources.demo",
    "init_demo": "nl2sql_assets.datasources.demo",
    "ensure_demo_data": "nl2sql_assets.datasources.demo",
    "render_project_yaml": "nl2sql_assets.datasources.demo",
    "render_evals_yaml": "nl2sql_assets.datasources.demo",
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
    "DEMO_POLICIES",
    "SUPPORT_QUESTIONS",
    "WEBANALYTICS_QUESTIONS",
    "ChinookError",
    "ColumnInfo",
    "DatasourceAdapter",
    "DatasourceError",
    "DatasourceRegistry",
    "DemoError",
    "DemoProject",
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
    "ensure_demo_data",
    "init_demo",
    "normalise_rows",
    "normalise_value",
    "open_adapter",
    "render_evals_yaml",
    "render_project_yaml",
    "resolve_chinook",
]
