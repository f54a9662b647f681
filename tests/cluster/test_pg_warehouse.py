"""Case records in Postgres: a partition stored again replaces its rows (never adds to them), reads
back in order, and its Parquet export is what DuckDB queries."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from nl2sql_assets.evaluation.history.pg_warehouse import PgCaseRecords
from nl2sql_assets.evaluation.running.results import CaseRecord, RunMeta
from tests.cluster.conftest import dsn


def _record(case: str, role: str, status: str, cost: float) -> CaseRecord:
    return CaseRecord(suite="s", case_id=case, role=role, config="plans", mode="plans", pass_index=1,
                      expected="allowed", status=status, execution_status=status, cost_usd=cost, latency_s=0.5)


def _meta() -> RunMeta:
    now = datetime.now(UTC)
    return RunMeta.model_validate({"mode": "plans", "run_stamp": {"started_at": now, "finished_at": now,
                                                                  "package_version": "test"}})


def test_a_partition_is_replaced_whole_and_exported_for_duckdb(pg_database: str, tmp_path: Path):
    import duckdb

    store = PgCaseRecords(dsn(pg_database), schema="warehouse_test")
    first = [_record(f"c{n}", role, "pass", 0.01) for n in range(3) for role in ("analyst", "viewer")]
    assert store.write_pass("s", "plans", 1, first, _meta()) == 6
    second = [_record("c9", "analyst", "fail", 0.02), _record("c1", "viewer", "pass", 0.03)]
    store.write_pass("s", "plans", 1, second, _meta())
    records, meta = store.read_pass("s", "plans", 1)
    assert records == second  # replaced, in the order written
    assert meta["mode"] == "plans"
    path = store.export_parquet("s", "plans", 1, tmp_path / "parquet")
    assert path == tmp_path / "parquet" / "suite=s" / "config=plans" / "pass=1.parquet"
    con = duckdb.connect()
    pattern = (tmp_path / "parquet" / "**" / "*.parquet").as_posix()
    rows = con.execute(f"SELECT config, case_id, status, cost_usd FROM read_parquet('{pattern}', "
                       "hive_partitioning = true) ORDER BY case_id").fetchall()
    assert rows == [("plans", "c1", "pass", 0.03), ("plans", "c9", "fail", 0.02)]
