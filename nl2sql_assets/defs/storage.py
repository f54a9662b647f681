"""Dagster's SQLite instance storage, with one engine per database file kept open and WAL commits
that do not wait for the disk.

Why: the stock ``DagsterSqliteStorage`` opens a new SQLAlchemy engine (``NullPool``) for every
event it stores and closes it again. In WAL mode the close of a file's last connection
checkpoints the WAL into the database and deletes it, and every commit runs with SQLite's
default ``synchronous=FULL``: one ``pipeline run`` made 1,009 ``fdatasync`` calls (1.1 s of the
run) for 89 events. Here each database file keeps one engine (a small connection pool) for the
life of the instance, and every connection runs with ``synchronous=NORMAL``.

Durability: in WAL mode ``synchronous=NORMAL`` never corrupts the database and loses nothing
when a process crashes or is killed (a commit is in the WAL file, in the OS's page cache, when it
returns); only an operating-system crash or a power cut can roll back the last transactions
committed since the previous checkpoint (SQLite's documentation: "WAL mode is always consistent
with synchronous=NORMAL, but WAL mode does lose durability"). For an evaluation's run history on
one machine that trade is right: a lost event after a power cut means re-running that run.

The files, tables and layout are Dagster's own (``history/runs.db``, ``history/runs/*.db``,
``schedules/``): an instance written by the stock storage reads here and the other way round.
``scripts/dagster.yaml`` selects this class as ``storage: custom``, so the webserver, the daemon
and the run workers use it too.
"""

import functools
import os
import sqlite3
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as db
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from dagster import _check as check
from dagster._config.config_schema import UserConfigSchema
from dagster._core.storage.event_log.base import EventHandlerFn
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
from dagster._core.storage.event_log.sqlite import sqlite_event_log
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
    SqliteEventLogStorageWatchdog,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sql import get_alembic_config, safe_commit
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS, create_db_conn_string
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
    _runs_directory,
    _schedule_directory,
)
from dagster._serdes import ConfigurableClassData
from dagster._utils import mkdir_p
from sqlalchemy import exc as db_exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool
from watchdog.events import FileSystemEvent
from watchdog.observers import Observer

# Run shards (one file per run) whose engines stay open in one process. A process writes one run
# at a time; the webserver reads a few; more than this and the least recently used is closed.
RUN_SHARDS_KEPT = 8


def _sqlite_engine(conn_string: str) -> Engine:
    """One engine for one SQLite file: WAL, ``synchronous=NORMAL``, Dagster's busy timeout.

    ``journal_mode=WAL`` on connect as well as in Dagster's own first-time setup, so a new run
    shard's tables are created under the WAL too (not under a rollback journal synced per
    statement); on a file already in WAL mode it changes nothing.
    """
    engine = db.create_engine(
        conn_string, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}, pool_size=2, max_overflow=8
    )

    @db.event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


@functools.cache
def _alembic_scripts() -> ScriptDirectory:
    """Dagster's migration scripts, read once per process. Dagster's own checks build this
    object at every call (each reading and executing the 90 migration files): for the runs,
    schedules and index databases when an instance starts, and twice for each run's new shard."""
    return ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))


def _stamped(conn: Connection) -> bool:
    """Whether the database carries an alembic revision: Dagster's checks do nothing more then."""
    return MigrationContext.configure(conn).get_current_revision() is not None


def _ready(conn_string: str, table: str) -> bool:
    """Whether an existing SQLite database is stamped and holds ``table`` (read only)."""
    engine = db.create_engine(conn_string, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return _stamped(conn) and db.inspect(conn).has_table(table)
    except (db_exc.DatabaseError, sqlite3.DatabaseError):
        return False
    finally:
        engine.dispose()


class _WalWatchdog(SqliteEventLogStorageWatchdog):
    """Dagster's watcher of one run's event log (the UI's live view of a run written by another
    process), woken by writes to the run's WAL file as well as to its database file.

    Dagster's own watches ``<run_id>.db`` only: it sees an event when the writer's closing
    connection checkpoints the WAL into that file, which the stock storage does after every event.
    A writer that keeps its engine open appends to ``<run_id>.db-wal`` and checkpoints rarely."""

    def __init__(
        self, storage: SqliteEventLogStorage, run_id: str, callback: EventHandlerFn, cursor: str | None
    ):
        super().__init__(storage, run_id, callback, cursor)
        self._paths = (self._log_path, self._log_path + "-wal")
        self._patterns = list(self._paths)  # watchdog's PatternMatchingEventHandler reads these

    def on_modified(self, event: FileSystemEvent) -> None:
        if event.src_path in self._paths:
            self._process_log()


class KeptEngineSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's SQLite event log, with the engines of the index and recent run shards kept open."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        super().__init__(base_dir, inst_data)

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.get(shard)
        if engine is None:
            engine = self._engines[shard] = _sqlite_engine(self.conn_string_for_shard(shard))
        self._engines.move_to_end(shard)
        run_shards = [name for name in self._engines if name != INDEX_SHARD_NAME]
        for name in run_shards[:-RUN_SHARDS_KEPT]:
            self._engines.pop(name).dispose()
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            check.str_param(shard, "shard")
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """Dagster's ``_initdb``, without re-reading the migration scripts each time: a stamped
        database needs nothing (as in Dagster's), a new run shard gets Dagster's tables and the
        head revision; anything else (an unstamped index, a race with another process) goes
        through Dagster's own, which knows those cases."""
        try:
            with engine.connect() as conn:
                if _stamped(conn):
                    return
                if not for_index_shard and not db.inspect(conn).has_table("event_logs"):
                    SqlEventLogStorageMetadata.create_all(conn)
                    conn.execute(db.text("PRAGMA journal_mode=WAL;"))
                    MigrationContext.configure(conn).stamp(_alembic_scripts(), "head")
                    safe_commit(conn)
                    return
        except (db_exc.DatabaseError, sqlite3.DatabaseError):
            pass  # e.g. another process created the tables first: Dagster's retrying path
        super()._initdb(engine, for_index_shard=for_index_shard)

    def watch(self, run_id: str, cursor: str | None, callback: EventHandlerFn) -> None:
        """Dagster's ``watch``, with the watcher that also wakes on the run's WAL file."""
        if not self._obs:
            self._obs = Observer()
            self._obs.start()
        watchdog = _WalWatchdog(self, run_id, callback, cursor)
        self._watchers[run_id][callback] = (
            watchdog,
            self._obs.schedule(watchdog, self._base_dir, recursive=True),
        )

    def dispose(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()
        super().dispose()


class KeptEngineSqliteRunStorage(SqliteRunStorage):
    """Dagster's SQLite run storage, with one engine kept open instead of one per query."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None):
        self._engine = _sqlite_engine(conn_string)
        super().__init__(conn_string, inst_data)

    @classmethod
    def from_local(cls, base_dir: str, inst_data: ConfigurableClassData | None = None) -> "KeptEngineSqliteRunStorage":
        """An existing, stamped ``runs.db`` opens as it is (Dagster's ``from_local`` would check it
        against the migration scripts, read afresh); anything else goes through Dagster's."""
        conn_string = create_db_conn_string(base_dir, "runs")
        if os.path.exists(os.path.join(base_dir, "runs.db")) and _ready(conn_string, "instance_info"):
            return cls(conn_string, inst_data)
        return super().from_local(base_dir, inst_data)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        self._engine.dispose()
        super().dispose()


class CheckedOnceSqliteScheduleStorage(SqliteScheduleStorage):
    """Dagster's SQLite schedule storage; an existing, stamped ``schedules.db`` opens as it is."""

    @classmethod
    def from_local(cls, base_dir: str, inst_data: ConfigurableClassData | None = None) -> SqliteScheduleStorage:
        conn_string = create_db_conn_string(base_dir, "schedules")
        if os.path.exists(os.path.join(base_dir, "schedules.db")) and _ready(conn_string, "jobs"):
            return cls(conn_string, inst_data)
        return super().from_local(base_dir, inst_data)


class KeptEngineSqliteStorage(DagsterSqliteStorage):
    """``DagsterSqliteStorage`` (same files under ``base_dir``) with the two storages above.

    Selected in ``dagster.yaml``::

        storage:
          custom:
            module: nl2sql_assets.defs.storage
            class: KeptEngineSqliteStorage
            config:
              base_dir: {env: DAGSTER_HOME}
    """

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        # What DagsterSqliteStorage.__init__ does, with the two storages above (its own would
        # check and migrate the same files a second time).
        self.base_dir = check.str_param(base_dir, "base_dir")
        self._run_storage = KeptEngineSqliteRunStorage.from_local(_runs_directory(base_dir))
        self._event_log_storage = KeptEngineSqliteEventLogStorage(_event_logs_directory(base_dir))
        self._schedule_storage = CheckedOnceSqliteScheduleStorage.from_local(_schedule_directory(base_dir))
        self._inst_data = check.opt_inst_param(inst_data, "inst_data", ConfigurableClassData)
        super(DagsterSqliteStorage, self).__init__()

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return DagsterSqliteStorage.config_type()

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Any
    ) -> "KeptEngineSqliteStorage":
        mkdir_p(config_value["base_dir"])
        return cls(config_value["base_dir"], inst_data=inst_data)
