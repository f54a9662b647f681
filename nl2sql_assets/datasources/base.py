"""The datasource adapter contract: one read statement, a row limit, a timeout that interrupts."""

from __future__ import annotations

import time
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.datasources.values import normalise_rows


class QueryOutput(BaseModel):
    """Rows of one read statement, values normalised to JSON-safe Python types.

    Decimal becomes float, date ``YYYY-MM-DD``, datetime ``YYYY-MM-DD HH:MM:SS`` (with
    fractional seconds only when present), bytes a hex string; everything else is kept.
    """

    model_config = ConfigDict(extra="forbid")

    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = False
    row_limit: int
    elapsed_ms: float = 0.0

    @classmethod
    def from_fetch(cls, columns: list[str], fetched: list[Any], limit: int, started: float) -> QueryOutput:
        """From up to ``limit + 1`` fetched rows: cut at ``limit``, flag the cut, normalise values.
        ``started`` is the ``time.monotonic()`` of the statement's start."""
        return cls(
            columns=columns,
            rows=normalise_rows(fetched[:limit]),
            truncated=len(fetched) > limit,
            row_limit=limit,
            elapsed_ms=(time.monotonic() - started) * 1000.0,
        )


class DatasourceError(Exception):
    """A statement could not run. ``code`` is what a QueryResult reports."""

    code = "EXECUTION_ERROR"


class ReadOnlyViolation(DatasourceError):
    """The statement is not a single read (a write, DDL, ATTACH, a write PRAGMA, several statements)."""

    code = "READ_ONLY_VIOLATION"


class QueryTimeout(DatasourceError):
    """The statement was interrupted at its timeout."""

    code = "TIMEOUT"


class QueryFailed(DatasourceError):
    """The database rejected or failed the statement."""

    code = "EXECUTION_ERROR"


class DatasourceUnavailable(DatasourceError):
    """The database could not be reached, refused the login, or went away mid-statement: the
    environment failed, not the SQL (a run counts such a case run as an environment error)."""

    code = "DATASOURCE_UNAVAILABLE"


@runtime_checkable
class DatasourceAdapter(Protocol):
    id: str
    engine: str  # the name of its engine (``datasources.engines``)
    dialect: str  # the sqlglot dialect name
    row_limit: int
    timeout_s: float

    def execute(self, sql: str, *, row_limit: int | None = None, timeout_s: float | None = None) -> QueryOutput:
        """Run one read statement; raise ReadOnlyViolation, QueryTimeout or QueryFailed."""
        ...

    def introspect(self) -> SchemaSnapshot: ...

    def could_write(self) -> str | None:
        """Why the login could change data (a server's superuser or write privilege), or None."""
        ...

    def close(self) -> None: ...
