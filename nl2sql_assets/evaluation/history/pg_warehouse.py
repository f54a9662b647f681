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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nl2sql_assets.evaluation.history.pg import pg_transaction
from nl2sql_assets.evaluation.history.pg_ledger import _ident
from nl2sql_assets.evaluation.running.results import CaseRecord, RunMeta
from nl2sql_assets.redact import redact


class PgCaseRecords:
    """Case records and run metadata of every partition, in Postgres."""

    def __init__(self, dsn: str, *, schema: str = "nl2sql") -> None:
        self.dsn = dsn
        self.schema = _ident(schema)
        with self._transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('nl2sql_assets.pg_warehouse'))")
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
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
        from psycopg2.extras import execute_values

        rows = [(suite, config, pass_index, r.case_id, r.role, n, r.status, r.execution_status, r.cost_usd,
                 r.latency_s, redact(r.model_dump_json())) for n, r in enumerate(records)]
        with self._transaction() as cur:
            key = [suite, config, pass_index]
            cur.execute(f"DELETE FROM {self.schema}.case_records WHERE suite = %s AND config = %s "
                        "AND pass_index = %s", key)
            execute_values(cur, f"INSERT INTO {self.schema}.case_records VALUES %s", rows, page_size=1000)
            cur.execute(f"INSERT INTO {self.schema}.run_metas VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (suite, config, pass_index) DO UPDATE SET meta = EXCLUDED.meta",
                        [*key, redact(json.dumps(meta.model_dump(mode="json"), sort_keys=True))])
        return len(rows)

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

    def export_parquet(self, suite: str, config: str, pass_index: int, folder: Path) -> Path:
        """Write one partition as ``<folder>/suite=/config=/pass=<n>.parquet`` (atomically) for DuckDB."""
        import duckdb

        records, _ = self.read_pass(suite, config, pass_index)
        out = Path(folder) / f"suite={suite}" / f"config={config}" / f"pass={pass_index}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".parquet.tmp")
        jsonl = out.with_suffix(".jsonl.tmp")
        jsonl.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
        con = duckdb.connect(":memory:", config={"threads": 1})
        try:
            src, dst = (str(p).replace("'", "''") for p in (jsonl, tmp))
            con.execute(f"COPY (SELECT * FROM read_json_auto('{src}', format = 'newline_delimited')) "
                        f"TO '{dst}' (FORMAT parquet)")
        finally:
            con.close()
            jsonl.unlink(missing_ok=True)
        tmp.replace(out)
        return out
