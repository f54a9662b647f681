"""Shards' case records in Postgres, where every worker writes and the merge step reads.

One row per (suite, config, pass, shard): the shard's CaseRuns (records and RunMeta) as JSON.
Writing a shard replaces its row in one statement (``INSERT ... ON CONFLICT DO UPDATE``), so a
shard run again after its worker died replaces its own records, never adds to them; the merge
step reads the rows of one partition and deletes them once the partition's records are stored.
"""

from __future__ import annotations

import contextlib
from typing import Any

from nl2sql_assets.evaluation.history.pg import pg_transaction
from nl2sql_assets.evaluation.history.pg_ledger import _ident
from nl2sql_assets.evaluation.running.results import CaseRuns
from nl2sql_assets.redact import redact


class PgShardStore:
    """``<schema>.case_shards``: each shard's CaseRuns until its partition is merged."""

    def __init__(self, dsn: str, *, schema: str = "nl2sql") -> None:
        self.dsn = dsn
        self.schema = _ident(schema)
        with self._transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('nl2sql_assets.pg_shards'))")
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.schema}.case_shards ("
                "suite text NOT NULL, config text NOT NULL, pass_index int NOT NULL, shard int NOT NULL, "
                "shards int NOT NULL, worker text NOT NULL, body jsonb NOT NULL, "
                "written_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
                "PRIMARY KEY (suite, config, pass_index, shard))"
            )

    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        return pg_transaction(self.dsn)

    def write(self, suite: str, config: str, pass_index: int, shard: int, shards: int, runs: CaseRuns,
              worker: str) -> None:
        """Store (or replace) one shard's records atomically."""
        with self._transaction() as cur:
            cur.execute(
                f"INSERT INTO {self.schema}.case_shards (suite, config, pass_index, shard, shards, worker, body) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (suite, config, pass_index, shard) "
                "DO UPDATE SET shards = EXCLUDED.shards, worker = EXCLUDED.worker, body = EXCLUDED.body, "
                "written_at = clock_timestamp()",
                [suite, config, pass_index, shard, shards, worker, redact(runs.model_dump_json())],
            )

    def read(self, suite: str, config: str, pass_index: int) -> list[tuple[int, str, CaseRuns]]:
        """Every stored shard of one partition, in shard order: (shard, worker, runs)."""
        with self._transaction() as cur:
            cur.execute(f"SELECT shard, worker, body::text FROM {self.schema}.case_shards "
                        "WHERE suite = %s AND config = %s AND pass_index = %s ORDER BY shard",
                        [suite, config, pass_index])
            rows = cur.fetchall()
        return [(shard, worker, CaseRuns.model_validate_json(body)) for shard, worker, body in rows]

    def clear(self, suite: str, config: str, pass_index: int) -> None:
        with self._transaction() as cur:
            cur.execute(f"DELETE FROM {self.schema}.case_shards WHERE suite = %s AND config = %s AND pass_index = %s",
                        [suite, config, pass_index])
