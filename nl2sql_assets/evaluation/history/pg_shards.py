"""Shards' case records in Postgres, where every worker writes and the merge step reads.

One row per (suite, config, pass, shard): the shard's RunMeta (``meta``, JSON) apart from its
records (``records``: the records file's own lines, redacted JSON, one per record). Writing a shard
replaces its row in one statement (``INSERT ... ON CONFLICT DO UPDATE``), so a shard run again
after its worker died replaces its own records, never adds to them; the merge step reads the rows
of one partition and deletes them once the partition's records are stored.

The merge reads the metas alone (``metas``: no record is parsed), then the records one shard at
a time (``record_lines``, a server-side cursor), copying each line as it is into the partition's
records file: its memory is one shard's, whatever the partition's size (``history.pg_merge``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

from nl2sql_assets.evaluation.history.pg import pg_tables, pg_transaction
from nl2sql_assets.evaluation.history.pg_ledger import _ident
from nl2sql_assets.evaluation.running.results import CaseRecord, CaseRuns, RunMeta
from nl2sql_assets.redact import redact


class StoredShard(NamedTuple):
    """One stored shard's row without its records."""

    shard: int
    shards: int
    worker: str
    meta: RunMeta
    records: int  # how many records it holds


class PgShardStore:
    """``<schema>.case_shards``: each shard's RunMeta and records until its partition is merged."""

    def __init__(self, dsn: str, *, schema: str = "nl2sql") -> None:
        self.dsn = dsn
        self.schema = _ident(schema)
        with pg_tables(self.dsn, "nl2sql_assets.pg_shards", self.schema) as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.schema}.case_shards ("
                "suite text NOT NULL, config text NOT NULL, pass_index int NOT NULL, shard int NOT NULL, "
                "shards int NOT NULL, worker text NOT NULL, meta jsonb NOT NULL, records text NOT NULL, "
                "record_count int NOT NULL, written_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
                "PRIMARY KEY (suite, config, pass_index, shard))"
            )
            self._upgrade(cur)

    def _upgrade(self, cur: Any) -> None:
        """A table of the earlier layout (the whole CaseRuns in one ``body`` column) takes the new
        columns. Its rows are shards in flight, not records: they are dropped, so a merge reports
        them missing and re-executing the run from failure runs them again. Checked first, so
        the usual case takes no table lock."""
        cur.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
                    "AND table_name = 'case_shards' AND column_name = 'body'", [self.schema])
        if cur.fetchone() is None:
            return
        cur.execute(f"DELETE FROM {self.schema}.case_shards")
        cur.execute(f"ALTER TABLE {self.schema}.case_shards DROP COLUMN body, ADD COLUMN meta jsonb NOT NULL, "
                    "ADD COLUMN records text NOT NULL, ADD COLUMN record_count int NOT NULL")

    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        return pg_transaction(self.dsn)

    def write(self, suite: str, config: str, pass_index: int, shard: int, shards: int, runs: CaseRuns,
              worker: str) -> None:
        """Store (or replace) one shard's records atomically."""
        lines = redact("".join(r.model_dump_json() + "\n" for r in runs.records))
        with self._transaction() as cur:
            cur.execute(
                f"INSERT INTO {self.schema}.case_shards (suite, config, pass_index, shard, shards, worker, meta, "
                "records, record_count) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (suite, config, pass_index, shard) DO UPDATE SET shards = EXCLUDED.shards, "
                "worker = EXCLUDED.worker, meta = EXCLUDED.meta, records = EXCLUDED.records, "
                "record_count = EXCLUDED.record_count, written_at = clock_timestamp()",
                [suite, config, pass_index, shard, shards, worker, redact(runs.meta.model_dump_json()), lines,
                 len(runs.records)],
            )

    def metas(self, suite: str, config: str, pass_index: int) -> list[StoredShard]:
        """Every stored shard of one partition without its records, in shard order."""
        with self._transaction() as cur:
            cur.execute(f"SELECT shard, shards, worker, meta::text, record_count FROM {self.schema}.case_shards "
                        "WHERE suite = %s AND config = %s AND pass_index = %s ORDER BY shard",
                        [suite, config, pass_index])
            rows = cur.fetchall()
        return [StoredShard(shard, shards, worker, RunMeta.model_validate_json(meta), count)
                for shard, shards, worker, meta, count in rows]

    def stored(self, suite: str, config: str, pass_index: int) -> set[int]:
        """The shard indexes of one partition that have records stored."""
        with self._transaction() as cur:
            cur.execute(f"SELECT shard FROM {self.schema}.case_shards WHERE suite = %s AND config = %s "
                        "AND pass_index = %s", [suite, config, pass_index])
            return {row[0] for row in cur.fetchall()}

    def record_lines(self, suite: str, config: str, pass_index: int) -> Iterator[tuple[int, list[str]]]:
        """(shard, its records' JSON lines, each ending in a newline), one shard at a time in
        shard order, from one snapshot (a server-side cursor fetching a row at a time): the
        caller holds one shard's records, never the partition's."""
        # A named cursor lives on the server; the transaction's snapshot holds for every fetch.
        with self._transaction() as cur, cur.connection.cursor(name=f"shard_records_{uuid.uuid4().hex[:12]}") as named:
            named.itersize = 1
            named.execute(f"SELECT shard, records FROM {self.schema}.case_shards WHERE suite = %s "
                          "AND config = %s AND pass_index = %s ORDER BY shard", [suite, config, pass_index])
            for shard, text in named:
                # split on newlines alone: a record's JSON may hold U+2028 and the like unescaped
                yield shard, [line + "\n" for line in text.split("\n")[:-1]]

    def read(self, suite: str, config: str, pass_index: int) -> list[tuple[int, str, CaseRuns]]:
        """Every stored shard of one partition, in shard order: (shard, worker, runs). Holds
        them all: for tests and small partitions (the merge step streams, ``record_lines``)."""
        stored = self.metas(suite, config, pass_index)
        lines = dict(self.record_lines(suite, config, pass_index))
        return [(s.shard, s.worker, CaseRuns(records=[CaseRecord.model_validate_json(line) for line in lines[s.shard]],
                                             meta=s.meta)) for s in stored]

    def clear(self, suite: str, config: str, pass_index: int) -> None:
        with self._transaction() as cur:
            cur.execute(f"DELETE FROM {self.schema}.case_shards WHERE suite = %s AND config = %s AND pass_index = %s",
                        [suite, config, pass_index])
