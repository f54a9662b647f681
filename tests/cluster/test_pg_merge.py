"""The cluster's streamed merge (history.pg_merge): a partition merged a shard at a time is stored
exactly as the list-based merge stored it (records file, RunMeta, Postgres rows, Parquet), and a
merge that fails midway leaves the earlier partition whole everywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nl2sql_assets.evaluation.history.pg_merge import (
    ShardsChanged,
    missing_shards,
    shards_by_worker,
    write_merged,
)
from nl2sql_assets.evaluation.history.pg_shards import PgShardStore
from nl2sql_assets.evaluation.history.pg_warehouse import PgCaseRecords
from nl2sql_assets.evaluation.history.warehouse import Warehouse
from nl2sql_assets.evaluation.running.request import RunRequest
from nl2sql_assets.evaluation.running.results import CaseRecord, CaseRuns, RunMeta
from nl2sql_assets.evaluation.running.shards import merge_metas, merge_shards
from tests.cluster.conftest import dsn

REQUEST = RunRequest(mode="plans")


def _record(case: str, role: str, status: str, cost: float, note: str = "") -> CaseRecord:
    return CaseRecord(suite="s", case_id=case, role=role, config="plans", mode="plans", pass_index=1,
                      expected="allowed", status=status, execution_status=status, cost_usd=cost, latency_s=0.5,
                      answer=f"how many {case}?{note}")


def _shard(n: int, cases: int, minute: int) -> CaseRuns:
    # A line separator inside a record's text: a line-based reader must not cut the record there.
    records = [_record(f"c{n}_{i}", role, "pass" if i % 3 else "fail", 0.001 * (i + 1),
                       note=" \u2028 é" if i == 1 else "")
               for i in range(cases) for role in ("analyst", "viewer")]
    meta = RunMeta.model_validate({
        "mode": "plans", "spent": 0.25 * (n + 1), "roles": ["analyst", "viewer"],
        "configs": {"plans": {"planned_cases": cases, "completed_cases": cases}},
        "run_stamp": {"started_at": datetime(2026, 12, 1, 4, minute, tzinfo=UTC),
                      "finished_at": datetime(2026, 12, 1, 4, minute + 2, tzinfo=UTC), "package_version": "t"}})
    return CaseRuns(records=records, meta=meta)


def _stores(pg_database: str, schema: str) -> tuple[PgShardStore, PgCaseRecords]:
    return PgShardStore(dsn(pg_database), schema=schema), PgCaseRecords(dsn(pg_database), schema=schema)


def _parquet_rows(path: Path) -> tuple[list[str], list[tuple]]:
    import duckdb

    con = duckdb.connect()
    try:
        rel = con.execute(f"SELECT * FROM read_parquet('{path.as_posix()}') ORDER BY case_id, role")
        return [d[0] for d in rel.description], rel.fetchall()
    finally:
        con.close()


def test_a_streamed_merge_stores_what_the_list_based_merge_stored(pg_database: str, tmp_path: Path):
    shards = [_shard(0, 4, 0), _shard(1, 3, 5), _shard(2, 5, 1)]
    store, streamed_pg = _stores(pg_database, "merge_streamed")
    for n, runs in enumerate(shards):
        store.write("s", "plans", 1, n, len(shards), runs, f"w{n % 2}")

    # Before: every shard read at once, merged into one CaseRuns, written three ways.
    old = merge_shards(REQUEST, [r for _, _, r in store.read("s", "plans", 1)])
    old_wh, old_pg = Warehouse(tmp_path / "old"), PgCaseRecords(dsn(pg_database), schema="merge_listed")
    old_path = old_wh.write_pass("s", "plans", 1, old.records, old.meta)
    old_pg.write_pass("s", "plans", 1, old.records, old.meta)
    old_parquet = old_pg.export_parquet("s", "plans", 1, tmp_path / "old" / "parquet")

    # Now: the metas alone merged, the records streamed a shard at a time.
    stored = store.metas("s", "plans", 1)
    assert missing_shards(stored, 3) is None and shards_by_worker(stored) == {"w0": 2, "w1": 1}
    meta = merge_metas(REQUEST, [s.meta for s in stored])
    assert meta == old.meta
    new_wh = Warehouse(tmp_path / "new")
    path, count = write_merged(store, streamed_pg, new_wh, "s", "plans", 1, stored, meta)
    assert count == 24 == len(old.records)
    assert path.read_bytes() == old_path.read_bytes()  # the records file, byte for byte
    assert path.read_text(encoding="utf-8").count("\n") == 24  # U+2028 stayed inside its record
    meta_file = "pass=1.meta.json"
    assert (path.parent / meta_file).read_bytes() == (old_path.parent / meta_file).read_bytes()
    assert streamed_pg.read_pass("s", "plans", 1) == old_pg.read_pass("s", "plans", 1)
    assert [r for _, _, r in store.read("s", "plans", 1)] == shards  # what each worker stored reads back
    parquet = streamed_pg.export_parquet("s", "plans", 1, tmp_path / "new" / "parquet", records_file=path)
    assert _parquet_rows(parquet) == _parquet_rows(old_parquet)  # same columns, same rows
    assert not list(path.parent.glob(".nl2sql-tmp-*")) and not list(parquet.parent.glob("*.tmp"))


def _snapshot(wh: Warehouse, pg: PgCaseRecords) -> tuple[bytes, bytes, tuple]:
    folder = wh.partition_dir("s", "plans")
    return ((folder / "pass=1.jsonl").read_bytes(), (folder / "pass=1.meta.json").read_bytes(),
            pg.read_pass("s", "plans", 1))


@pytest.mark.parametrize("fault", ["corrupt record", "shard rewritten"])
def test_a_merge_that_fails_midway_leaves_the_earlier_partition_whole(pg_database: str, tmp_path: Path,
                                                                      fault: str):
    schema = "merge_fault_" + fault.split()[0]
    store, pg = _stores(pg_database, schema)
    wh = Warehouse(tmp_path / "wh")
    earlier = _shard(9, 2, 0)
    wh.write_pass("s", "plans", 1, earlier.records, earlier.meta)
    pg.write_pass("s", "plans", 1, earlier.records, earlier.meta)
    before = _snapshot(wh, pg)

    shards = [_shard(0, 300, 0), _shard(1, 300, 5), _shard(2, 3, 8)]  # shard 0 alone passes a batch of rows
    for n, runs in enumerate(shards):
        store.write("s", "plans", 1, n, len(shards), runs, "w")
    stored = store.metas("s", "plans", 1)
    meta = merge_metas(REQUEST, [s.meta for s in stored])
    import psycopg2

    con = psycopg2.connect(dsn(pg_database))
    with con, con.cursor() as cur:
        if fault == "corrupt record":  # the last shard's second record is not a record
            cur.execute(f"UPDATE {schema}.case_shards SET records = regexp_replace(records, E'\\n[^\\n]*\\n', "
                        "E'\\n{\"not\": \"a record\"}\\n') WHERE shard = 2")
    con.close()
    if fault == "shard rewritten":  # a late step replaced shard 1 after its meta was merged
        store.write("s", "plans", 1, 1, 3, _shard(1, 2, 5), "late")
    with pytest.raises(ShardsChanged if fault == "shard rewritten" else ValueError):
        write_merged(store, pg, wh, "s", "plans", 1, stored, meta)
    assert _snapshot(wh, pg) == before  # records file, RunMeta and Postgres rows all as they were
    assert not list(wh.partition_dir("s", "plans").glob(".nl2sql-tmp-*"))  # no temporary file left


def test_a_shard_table_of_the_earlier_layout_is_upgraded(pg_database: str):
    import psycopg2

    con = psycopg2.connect(dsn(pg_database))
    with con, con.cursor() as cur:
        cur.execute("CREATE SCHEMA merge_upgrade")
        cur.execute("CREATE TABLE merge_upgrade.case_shards (suite text NOT NULL, config text NOT NULL, "
                    "pass_index int NOT NULL, shard int NOT NULL, shards int NOT NULL, worker text NOT NULL, "
                    "body jsonb NOT NULL, written_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
                    "PRIMARY KEY (suite, config, pass_index, shard))")
        cur.execute("INSERT INTO merge_upgrade.case_shards VALUES ('s', 'plans', 1, 0, 1, 'w', '{}')")
    con.close()
    store = PgShardStore(dsn(pg_database), schema="merge_upgrade")
    assert store.metas("s", "plans", 1) == []  # an old shard in flight is dropped: the merge reports it missing
    assert missing_shards([], 1) == "expected shards 0..0, found [] in Postgres"
    runs = _shard(0, 2, 0)
    store.write("s", "plans", 1, 0, 1, runs, "w")
    assert store.read("s", "plans", 1) == [(0, "w", runs)]
    assert PgShardStore(dsn(pg_database), schema="merge_upgrade").read("s", "plans", 1) == [(0, "w", runs)]
