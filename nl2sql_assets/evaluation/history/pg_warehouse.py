"""The warehouse's case records in Postgres (the cluster profile), with Parquet per partition for DuckDB.

Every machine of a cluster writes and reads the same rows: ``<schema>.case_records`` keyed by
(suite, config, pass, case, role), the record itself as JSON beside the columns boards filter on,
and ``<schema>.run_metas`` (one RunMeta per partition). Storing a partition replaces it in one
transaction, so a reader sees the old pass or the new one, never a mix. It answers what the boards
ask of the file warehouse (``passes``, ``configs``, ``read_pass``), so under the cluster profile a
scoreboard on any machine is built from these rows; ``<schema>.scoreboards`` keeps each config's
stored scoreboard (the report JSON) for the gate and the benchmark records on other machines.

For analysis each stored partition is also exported as one Parquet file under
``<folder>/suite=<s>/config=<c>/pass=<n>.parquet`` (the same hive layout as the JSONL files), which
DuckDB reads without an extension or a network connection; ``scripts/bench_pg_warehouse.py``
measures it against DuckDB over the JSONL files and over rows fetched from Postgres.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nl2sql_assets.evaluation.history.pg import pg_tables, pg_transaction
from nl2sql_assets.evaluation.history.pg_ledger import _ident
from nl2sql_assets.evaluation.running.results import CaseRecord, RunMeta
from nl2sql_assets.redact import redact

#: Rows per Parquet row group. DuckDB buffers a whole row group before writing it; at its default
#: (122,880 rows, about 8 KB each here) converting 48,000 records peaked at 1.1 GB, at 2,048 rows
#: at 0.28 GB, the same as for 12,000 (docs/performance.md, "Where a worker's memory goes").
PARQUET_ROW_GROUP = 2048


class PgCaseRecords:
    """Case records and run metadata of every partition, in Postgres."""

    def __init__(self, dsn: str, *, schema: str = "nl2sql") -> None:
        self.dsn = dsn
        self.schema = _ident(schema)
        with pg_tables(self.dsn, "nl2sql_assets.pg_warehouse", self.schema) as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.schema}.case_records ("
                "suite text NOT NULL, config text NOT NULL, pass_index int NOT NULL, case_id text NOT NULL, "
                "role text NOT NULL, ord int NOT NULL, status text NOT NULL, execution_status text, cost_usd double precision, "
                "latency_s double precision, record jsonb NOT NULL, "
                "PRIMARY KEY (suite, config, pass_index, case_id, role))"
            )
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.schema}.run_metas ("
                "suite text NOT NULL, config text NOT NULL, pass_index int NOT NULL, meta jsonb NOT NULL, "
                "PRIMARY KEY (suite, config, pass_index))"
            )
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.schema}.scoreboards ("
                "suite text NOT NULL, config text NOT NULL, report text NOT NULL, "
                "written_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (suite, config))"
            )

    @property
    def location(self) -> str:
        """Where the records are, for messages (the file warehouse names its folder)."""
        dbname = next((part.split("=", 1)[1] for part in self.dsn.split() if part.startswith("dbname=")), "?")
        return f"Postgres database {dbname}, schema {self.schema}"

    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        return pg_transaction(self.dsn)

    def write_pass(self, suite: str, config: str, pass_index: int, records: Sequence[CaseRecord],
                   meta: RunMeta) -> int:
        """Replace one partition's records and RunMeta atomically; returns the rows written."""
        with self.replacing_pass(suite, config, pass_index) as rows:
            for record in records:
                rows.add(record, redact(record.model_dump_json()))
            rows.meta = meta
        return rows.count

    @contextlib.contextmanager
    def replacing_pass(self, suite: str, config: str, pass_index: int) -> Iterator[PassRows]:
        """One partition's records replaced in one transaction, added a batch at a time as they
        come (``PassRows.add``; its ``meta`` must be set before the block ends): readers see the
        old partition until the block ends, then the new one; an error leaves the old one whole."""
        with self._transaction() as cur:
            cur.execute(f"DELETE FROM {self.schema}.case_records WHERE suite = %s AND config = %s "
                        "AND pass_index = %s", [suite, config, pass_index])
            rows = PassRows(cur, self.schema, suite, config, pass_index)
            yield rows
            rows.finish()

    def read_pass(self, suite: str, config: str, pass_index: int) -> tuple[list[CaseRecord], dict[str, Any] | None]:
        """One partition's records in the order they were written, and its RunMeta."""
        with self._transaction() as cur:
            key = [suite, config, pass_index]
            cur.execute(f"SELECT record::text FROM {self.schema}.case_records WHERE suite = %s AND config = %s "
                        "AND pass_index = %s ORDER BY ord", key)
            records = [CaseRecord.model_validate_json(text) for (text,) in cur.fetchall()]
            cur.execute(f"SELECT meta FROM {self.schema}.run_metas WHERE suite = %s AND config = %s "
                        "AND pass_index = %s", key)
            row = cur.fetchone()
        return records, (row[0] if row else None)

    def passes(self, suite: str, config: str) -> list[int]:
        """The stored passes of one config, in order (every stored pass has its RunMeta)."""
        with self._transaction() as cur:
            cur.execute(f"SELECT pass_index FROM {self.schema}.run_metas WHERE suite = %s AND config = %s "
                        "ORDER BY pass_index", [suite, config])
            return [n for (n,) in cur.fetchall()]

    def configs(self, suite: str) -> list[str]:
        """The configs with a stored pass of ``suite``, sorted."""
        with self._transaction() as cur:
            cur.execute(f"SELECT DISTINCT config FROM {self.schema}.run_metas WHERE suite = %s ORDER BY config",
                        [suite])
            return [c for (c,) in cur.fetchall()]

    def write_scoreboard(self, suite: str, config: str, report_json: str) -> None:
        """Store (or replace) one config's scoreboard, the report JSON as saved to its file."""
        with self._transaction() as cur:
            cur.execute(f"INSERT INTO {self.schema}.scoreboards (suite, config, report) VALUES (%s, %s, %s) "
                        "ON CONFLICT (suite, config) DO UPDATE SET report = EXCLUDED.report, "
                        "written_at = clock_timestamp()", [suite, config, redact(report_json)])

    def read_scoreboards(self, suite: str) -> dict[str, str]:
        """Every stored scoreboard of ``suite``: config -> report JSON."""
        with self._transaction() as cur:
            cur.execute(f"SELECT config, report FROM {self.schema}.scoreboards WHERE suite = %s ORDER BY config",
                        [suite])
            return dict(cur.fetchall())

    def export_parquet(self, suite: str, config: str, pass_index: int, folder: Path,
                       records_file: Path | None = None) -> Path:
        """Write one partition as ``<folder>/suite=/config=/pass=<n>.parquet`` (atomically) for DuckDB.

        ``records_file``: the partition's records file (its JSON lines as stored here), which
        DuckDB converts itself, a row group at a time: nothing is read back from Postgres nor
        held in Python (the merge step's way). Without it the records are read from Postgres a
        batch at a time into a temporary records file first."""
        import duckdb

        out = Path(folder) / f"suite={suite}" / f"config={config}" / f"pass={pass_index}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".parquet.tmp")
        jsonl = out.with_suffix(".jsonl.tmp")
        try:
            if records_file is None:
                with jsonl.open("w", encoding="utf-8") as fh:
                    for record in self.iter_records(suite, config, pass_index):
                        fh.write(record.model_dump_json() + "\n")
            con = duckdb.connect(":memory:", config={"threads": 1})
            try:
                src, dst = (str(p).replace("'", "''") for p in (records_file or jsonl, tmp))
                # hive_partitioning off: the records carry suite, config and pass_index themselves
                con.execute(f"COPY (SELECT * FROM read_json_auto('{src}', format = 'newline_delimited', "
                            f"hive_partitioning = false)) TO '{dst}' (FORMAT parquet, "
                            f"ROW_GROUP_SIZE {PARQUET_ROW_GROUP})")
            finally:
                con.close()
            tmp.replace(out)
        finally:
            jsonl.unlink(missing_ok=True)
            tmp.unlink(missing_ok=True)
        return out

    def iter_records(self, suite: str, config: str, pass_index: int, batch: int = 1000) -> Iterator[CaseRecord]:
        """One partition's records in order, fetched ``batch`` at a time (a server-side cursor)."""
        with self._transaction() as cur, cur.connection.cursor(name=f"records_{uuid.uuid4().hex[:12]}") as named:
            named.itersize = batch
            named.execute(f"SELECT record::text FROM {self.schema}.case_records WHERE suite = %s AND config = %s "
                          "AND pass_index = %s ORDER BY ord", [suite, config, pass_index])
            for (text,) in named:
                yield CaseRecord.model_validate_json(text)


class PassRows:
    """The rows of one partition being replaced (``PgCaseRecords.replacing_pass``): records are
    inserted ``BATCH`` at a time, so the writer holds one batch, never the partition."""

    BATCH = 1000

    def __init__(self, cur: Any, schema: str, suite: str, config: str, pass_index: int) -> None:
        self.cur, self.schema, self.key = cur, schema, [suite, config, pass_index]
        self.count = 0
        self.meta: RunMeta | None = None
        self._rows: list[tuple[Any, ...]] = []

    def add(self, record: CaseRecord, line: str) -> None:
        """One record, in partition order; ``line``: its stored JSON (redacted)."""
        suite, config, pass_index = self.key
        self._rows.append((suite, config, pass_index, record.case_id, record.role, self.count, record.status,
                           record.execution_status, record.cost_usd, record.latency_s, line.rstrip("\n")))
        self.count += 1
        if len(self._rows) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        from psycopg2.extras import execute_values

        if self._rows:
            execute_values(self.cur, f"INSERT INTO {self.schema}.case_records VALUES %s", self._rows,
                           page_size=self.BATCH)
            self._rows = []

    def finish(self) -> None:
        """The last batch and the RunMeta (inside the transaction)."""
        if self.meta is None:
            raise ValueError(f"partition {self.key}: no RunMeta given for its records")
        self._flush()
        self.cur.execute(f"INSERT INTO {self.schema}.run_metas VALUES (%s, %s, %s, %s) "
                         "ON CONFLICT (suite, config, pass_index) DO UPDATE SET meta = EXCLUDED.meta",
                         [*self.key, redact(json.dumps(self.meta.model_dump(mode="json"), sort_keys=True))])
