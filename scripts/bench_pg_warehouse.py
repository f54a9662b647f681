"""Benchmark of the cluster warehouse's DuckDB view: Parquet written per partition against a
Postgres export (COPY of the JSON records to a file DuckDB reads), DuckDB over the JSONL files
(the default layout), and the same summary as SQL in Postgres itself.

Synthetic case records (--records, split into --partitions partitions) are written to a fresh
Postgres database (127.0.0.1:5432, trust; dropped afterwards). Each figure is min/median/max over
--repeats runs. Usage: python scripts/bench_pg_warehouse.py --records 50000 --partitions 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

SUMMARY = ("SELECT config, pass_index, count(*) AS runs, count(*) FILTER (WHERE status = 'pass') AS passed, "
           "coalesce(sum(cost_usd), 0) AS cost_usd, avg(latency_s) AS mean_latency_s FROM {src} "
           "GROUP BY ALL ORDER BY ALL")


def timed(label: str, fn: Callable[[], object], repeats: int) -> None:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - started)
    print(f"{label:<58} min {min(seconds):7.3f} s  median {statistics.median(seconds):7.3f} s  "
          f"max {max(seconds):7.3f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import duckdb
    import psycopg2

    from nl2sql_assets.evaluation.history.pg_warehouse import PgCaseRecords
    from nl2sql_assets.evaluation.history.warehouse import Warehouse
    from nl2sql_assets.evaluation.running.results import CaseRecord, RunMeta

    db = f"nl2sql_bench_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect("host=127.0.0.1 dbname=postgres user=postgres", connect_timeout=3)
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    dsn = f"host=127.0.0.1 dbname={db} user=postgres"
    now = datetime.now(UTC)
    meta = RunMeta.model_validate({"mode": "plans", "run_stamp": {"started_at": now, "finished_at": now,
                                                                  "package_version": "bench"}})
    per = args.records // args.partitions
    parts = {}
    for p in range(args.partitions):
        parts[("s", f"cfg{p // 3}", p % 3 + 1)] = [
            CaseRecord(suite="s", case_id=f"case_{n:06d}", role="analyst", config=f"cfg{p // 3}", mode="plans",
                       pass_index=p % 3 + 1, expected="allowed", status="pass" if n % 7 else "fail",
                       execution_status="pass", cost_usd=0.001 * (n % 5), latency_s=0.1 + (n % 11) / 100,
                       sql="SELECT COUNT(*) AS n FROM Customer", tags=["synthetic"], datasources=["chinook"])
            for n in range(per)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            store = PgCaseRecords(dsn, schema="bench")
            files = Warehouse(root / "warehouse")
            print(f"{args.records} records in {args.partitions} partitions", flush=True)
            timed("write JSONL files (the default layout)", lambda: [
                files.write_pass(s, c, p, recs, meta) for (s, c, p), recs in parts.items()], args.repeats)
            timed("write Postgres rows (replace each partition)", lambda: [
                store.write_pass(s, c, p, recs, meta) for (s, c, p), recs in parts.items()], args.repeats)
            timed("export Parquet per partition (from Postgres)", lambda: [
                store.export_parquet(s, c, p, root / "parquet") for (s, c, p) in parts], args.repeats)

            def export_all() -> None:
                con = psycopg2.connect(dsn)
                with con, con.cursor() as cur, (root / "export.jsonl").open("w") as fh:
                    cur.copy_expert("COPY (SELECT record FROM bench.case_records) TO STDOUT", fh)
                con.close()

            timed("Postgres export: COPY every record to one JSONL file", export_all, args.repeats)
            parquet = (root / "parquet" / "**" / "*.parquet").as_posix()
            jsonl = (root / "warehouse" / "case_records" / "**" / "*.jsonl").as_posix()
            con = duckdb.connect(":memory:", config={"threads": 1})
            timed("DuckDB summary over the Parquet files", lambda: con.execute(
                SUMMARY.format(src=f"read_parquet('{parquet}')")).fetchall(), args.repeats)
            timed("DuckDB summary over the exported JSONL", lambda: con.execute(SUMMARY.format(
                src=f"read_json_auto('{(root / 'export.jsonl').as_posix()}', format = 'newline_delimited')")
            ).fetchall(), args.repeats)
            timed("DuckDB summary over the warehouse JSONL files", lambda: con.execute(SUMMARY.format(
                src=f"read_json_auto('{jsonl}', format = 'newline_delimited', union_by_name = true)")
            ).fetchall(), args.repeats)

            def in_postgres() -> None:
                pg = psycopg2.connect(dsn)
                with pg, pg.cursor() as cur:
                    cur.execute(SUMMARY.replace("GROUP BY ALL ORDER BY ALL", "GROUP BY 1, 2 ORDER BY 1, 2")
                                .format(src="bench.case_records"))
                    cur.fetchall()
                pg.close()

            timed("the same summary as SQL in Postgres", in_postgres, args.repeats)
            size = sum(f.stat().st_size for f in (root / "parquet").rglob("*.parquet"))
            jsize = sum(f.stat().st_size for f in (root / "warehouse").rglob("*.jsonl"))
            print(f"Parquet {size / 1e6:.1f} MB, JSONL {jsize / 1e6:.1f} MB", flush=True)
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
