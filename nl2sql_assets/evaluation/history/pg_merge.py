"""The cluster's merge step, streamed: a partition's shards (``PgShardStore``) become its records
file in the warehouse and its rows in Postgres (``PgCaseRecords``) one shard at a time, so the
step's memory is one shard's records, whatever the partition's size.

The caller merges the shards' RunMetas first (``running.shards.merge_metas``: no record is read)
and refuses an incomplete run before anything is written. ``write_merged`` then reads each shard's
records as the lines its worker stored (one server-side cursor, one snapshot), copies every line
as it is into the records file (``Warehouse.write_pass_lines``: a temporary file renamed into
place at the end) and adds it to the partition's Postgres rows (one transaction, a batch at a
time). A merge that fails midway (Postgres lost, a shard missing or changed) leaves neither: the
temporary file is removed, the transaction rolled back, the earlier partition whole in both.
The Parquet copy is then converted by DuckDB from the finished records file
(``PgCaseRecords.export_parquet``), never from records held in Python.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nl2sql_assets.evaluation.running.results import CaseRecord

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.history.pg_shards import PgShardStore, StoredShard
    from nl2sql_assets.evaluation.history.pg_warehouse import PgCaseRecords
    from nl2sql_assets.evaluation.history.warehouse import Warehouse
    from nl2sql_assets.evaluation.running.results import RunMeta


class ShardsChanged(RuntimeError):
    """The shards read for their records are not the ones whose metas were merged."""


def missing_shards(stored: Sequence[StoredShard], expected: int) -> str | None:
    """Why the stored shards are not exactly shards 0..expected-1 (None when they are)."""
    found = [s.shard for s in stored]
    if found == list(range(expected)):
        return None
    return f"expected shards 0..{expected - 1}, found {found} in Postgres"


def shards_by_worker(stored: Sequence[StoredShard]) -> dict[str, int]:
    """How many of the partition's shards each worker stored (the merge step's metadata)."""
    workers: dict[str, int] = {}
    for s in stored:
        workers[s.worker] = workers.get(s.worker, 0) + 1
    return workers


def write_merged(shards: PgShardStore, shared: PgCaseRecords, warehouse: Warehouse, suite: str, config: str,
                 pass_index: int, stored: Sequence[StoredShard], meta: RunMeta) -> tuple[Path, int]:
    """Store the partition whose shards are ``stored`` (their metas merged into ``meta``): its
    records file and RunMeta in the warehouse, its rows and RunMeta in Postgres, reading and
    writing one shard's records at a time. Returns the records file and the records written."""
    wanted = [(s.shard, s.records) for s in stored]

    with shared.replacing_pass(suite, config, pass_index) as rows:

        def lines() -> Iterator[str]:
            seen: list[tuple[int, int]] = []
            for shard, shard_lines in shards.record_lines(suite, config, pass_index):
                seen.append((shard, len(shard_lines)))
                if seen != wanted[:len(seen)]:
                    raise ShardsChanged(_changed(suite, config, pass_index, wanted, seen))
                for line in shard_lines:
                    rows.add(CaseRecord.model_validate_json(line), line)
                    yield line
                del shard_lines  # the next shard's records replace this one's
            if seen != wanted:
                raise ShardsChanged(_changed(suite, config, pass_index, wanted, seen))

        path = warehouse.write_pass_lines(suite, config, pass_index, lines())
        warehouse.write_pass_meta(suite, config, pass_index, meta)
        rows.meta = meta
    return path, rows.count


def _changed(suite: str, config: str, pass_index: int, wanted: list[tuple[int, int]],
             seen: list[tuple[int, int]]) -> str:
    return (f"partition {suite}/{config}|{pass_index}: the stored shards changed during the merge "
            f"(expected (shard, records) {wanted}, read {seen}); nothing was stored: run the merge again")
