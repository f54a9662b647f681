"""The instance storage of scripts/dagster.yaml (defs/storage.py): Dagster's own SQLite files,
written through kept engines under WAL with synchronous=NORMAL, and read back by Dagster's stock
storage (what a webserver without our class would read), runs, events and materialisations."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage

from nl2sql_assets.defs.storage import (
    RUN_SHARDS_KEPT,
    KeptEngineSqliteEventLogStorage,
    KeptEngineSqliteRunStorage,
)

REPO = Path(__file__).resolve().parents[2]


@dg.asset
def numbers() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"count": 3})


@dg.asset(deps=[numbers])
def total() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"sum": 6})


def test_the_projects_instance_writes_runs_that_dagsters_stock_storage_reads(dagster_home: Path) -> None:
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.event_log_storage, KeptEngineSqliteEventLogStorage)
        assert isinstance(instance.run_storage, KeptEngineSqliteRunStorage)
        result = dg.materialize([numbers, total], instance=instance)
        assert result.success
        run_id = result.run_id

    # Dagster's own classes on the same folder: the run, its events and the materialisations.
    stock = DagsterSqliteStorage.from_local(str(dagster_home))
    try:
        (run,) = stock.run_storage.get_runs()
        assert run.run_id == run_id and run.status == dg.DagsterRunStatus.SUCCESS
        types = [e.dagster_event_type for e in stock.event_log_storage.get_logs_for_run(run_id)]
        assert types.count(dg.DagsterEventType.ASSET_MATERIALIZATION) == 2
        assert types[-1] == dg.DagsterEventType.RUN_SUCCESS
        latest = stock.event_log_storage.get_latest_materialization_events([dg.AssetKey("total")])
        assert latest[dg.AssetKey("total")].asset_materialization.metadata["sum"].value == 6
    finally:
        stock.dispose()


def test_every_connection_is_wal_with_synchronous_normal(dagster_home: Path) -> None:
    with dg.DagsterInstance.get() as instance:
        run_id = dg.materialize([numbers], instance=instance).run_id
        events = instance.event_log_storage
        for connect in (
            events.index_connection,
            lambda: events.run_connection(run_id),
            instance.run_storage.connect,
        ):
            with connect() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL (FULL is 2)


def test_a_long_lived_process_keeps_only_a_few_run_shards_open(dagster_home: Path) -> None:
    with dg.DagsterInstance.get() as instance:
        run_ids = [dg.materialize([numbers], instance=instance).run_id for _ in range(RUN_SHARDS_KEPT + 3)]
        events = instance.event_log_storage
        assert isinstance(events, KeptEngineSqliteEventLogStorage)
        kept = [shard for shard in events._engines if shard != "index"]
        assert kept == run_ids[-RUN_SHARDS_KEPT:]
        # A closed shard opens again when read.
        assert any(
            e.dagster_event_type == dg.DagsterEventType.RUN_SUCCESS for e in instance.all_logs(run_ids[0])
        )
    assert events._engines == {}  # disposed with the instance


def test_the_ui_sees_a_runs_events_as_another_process_writes_them(dagster_home: Path) -> None:
    """The webserver watches a run that a run worker writes: it must see each event while the
    worker's engine stays open (its writes sit in the run's WAL file, not yet checkpointed)."""
    import time
    import uuid

    run_id = str(uuid.uuid4())
    seen: list = []
    job = dg.Definitions(assets=[numbers, total]).resolve_implicit_global_asset_job_def()
    with dg.DagsterInstance.get() as webserver, dg.DagsterInstance.get() as worker:
        webserver.event_log_storage.watch(
            run_id, None, lambda entry, cursor: seen.append(entry.dagster_event_type)
        )
        assert job.execute_in_process(instance=worker, run_id=run_id).success
        deadline = time.monotonic() + 30  # the watcher's thread reads them; a bound, not a timing
        while dg.DagsterEventType.RUN_SUCCESS not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.event_log_storage._engines.get(run_id) is not None  # still open: nothing checkpointed
        assert seen.count(dg.DagsterEventType.ASSET_MATERIALIZATION) == 2
        assert seen[-1] == dg.DagsterEventType.RUN_SUCCESS


_PRINTING_RUN = """
import os, sys
import dagster as dg

@dg.asset
def talker() -> None:
    print("line from print")
    sys.stdout.flush()
    os.write(1, b"line written to fd 1\\n")
    print("line on stderr", file=sys.stderr)

with dg.DagsterInstance.get() as instance:
    manager = instance.compute_log_manager
    print(f"manager={type(manager).__name__}", file=sys.stderr, flush=True)
    assert dg.materialize([talker], instance=instance).success
"""


def test_compute_logs_are_stored_and_mirrored_to_the_terminal_without_helper_processes(dagster_home: Path) -> None:
    """What a step prints lands in Dagster's compute-log files (what the UI shows) and on the
    run process's own terminal, as with Dagster's tail processes; no process is started for it."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _PRINTING_RUN], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, DAGSTER_HOME=str(dagster_home)))
    assert proc.returncode == 0, proc.stderr
    assert "manager=MirroredComputeLogManager" in proc.stderr
    assert "line from print" in proc.stdout and "line written to fd 1" in proc.stdout
    assert "line on stderr" in proc.stderr
    stored = {p.suffix: p.read_text() for p in (dagster_home / "storage").rglob("*") if p.suffix in (".out", ".err")}
    assert "line from print" in stored[".out"] and "line written to fd 1" in stored[".out"]
    assert "line on stderr" in stored[".err"]
    assert list((dagster_home / "storage").rglob("*.complete"))  # the capture is marked complete


def test_the_mirror_starts_no_process(dagster_home: Path, monkeypatch) -> None:
    import subprocess

    started: list = []
    monkeypatch.setattr(subprocess.Popen, "__init__", lambda self, *a, **k: started.append(a) or 1 / 0)
    with dg.DagsterInstance.get() as instance, instance.compute_log_manager.capture_logs(["run", "key"]):
        print("captured")
    assert started == []


def _schema(path: Path) -> tuple[list, list]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        tables = sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
        return tables, conn.execute("SELECT version_num FROM alembic_version").fetchall()
    finally:
        conn.close()


def test_new_databases_get_dagsters_tables_and_revision_as_its_own_storage_writes_them(
        dagster_home: Path, tmp_path: Path) -> None:
    """The instance's databases and a run's shard, made without re-reading Dagster's migration
    scripts at each check: the same tables, indexes and alembic revision as the stock storage's."""
    with dg.DagsterInstance.get() as instance:
        ours = dg.materialize([numbers], instance=instance).run_id
    with dg.DagsterInstance.get() as instance:  # a second start: the stamped files open as they are
        again = dg.materialize([numbers], instance=instance).run_id
    stock_home = tmp_path / "stock"
    stock = DagsterSqliteStorage.from_local(str(stock_home))
    try:
        with dg.instance_for_test(temp_dir=str(stock_home)) as instance:
            theirs = dg.materialize([numbers], instance=instance).run_id
    finally:
        stock.dispose()
    for ours_path, theirs_path in [
        (f"history/runs/{ours}.db", f"history/runs/{theirs}.db"),
        (f"history/runs/{again}.db", f"history/runs/{theirs}.db"),
        ("history/runs/index.db", "history/runs/index.db"),
        ("history/runs.db", "history/runs.db"),
        ("schedules/schedules.db", "schedules/schedules.db"),
    ]:
        assert _schema(dagster_home / ours_path) == _schema(stock_home / theirs_path), ours_path
