"""The executor: one read statement through the datasource adapter, with its row limit and timeout.

The adapter enforces read-only access and interrupts at the timeout; this module only picks
the effective limit (the datasource's, or the validator's smaller row budget) and shapes the
output as a ResultSet. It blocks, so the engine runs it in a worker thread.
"""

from __future__ import annotations

from nl2sql_assets.datasources.base import DatasourceAdapter
from nl2sql_assets.engine.result import ResultSet


def effective_row_limit(adapter: DatasourceAdapter, limit_applied: int | None) -> int:
    limit = int(adapter.row_limit)
    return min(limit, limit_applied) if limit_applied is not None else limit


def execute(
    adapter: DatasourceAdapter,
    datasource_id: str,
    sql: str,
    *,
    limit_applied: int | None = None,
    timeout_s: float | None = None,
) -> ResultSet:
    """Run ``sql``; raises the adapter's DatasourceError subclasses (each with a ``code``)."""
    out = adapter.execute(
        sql,
        row_limit=effective_row_limit(adapter, limit_applied),
        timeout_s=timeout_s if timeout_s is not None else adapter.timeout_s,
    )
    return ResultSet(
        datasource=datasource_id, sql=sql, columns=list(out.columns), rows=out.rows, truncated=out.truncated
    )
