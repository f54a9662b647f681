"""Writing the demo's database files: the generated DuckDB databases and the checked copy of Chinook,
each built under a temporary name and renamed into place, so a crash never leaves half a file."""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from nl2sql_assets.datasources.chinook import CHINOOK_SHA256, resolve_chinook, sha256_file
from nl2sql_assets.demo.catalog import DEMO_FILES, DEMO_SEED, DemoError
from nl2sql_assets.demo.customers import ChinookCustomer, TableData, read_chinook_customers
from nl2sql_assets.demo.support import SUPPORT_DDL, build_support
from nl2sql_assets.demo.webanalytics import WEBANALYTICS_DDL, build_webanalytics


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""  # read back as NULL; the generators never produce an empty string
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return value


def _load_csv(conn: Any, table: str, data: TableData, folder: Path) -> None:
    """Rows go in through a temporary CSV file: far faster than executemany or huge VALUES lists."""
    path = folder / f"{table}.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerows([_csv_cell(v) for v in row] for row in data.rows)
    cols = ", ".join(data.columns)
    literal = str(path).replace("'", "''")
    conn.execute(
        f"COPY {table} ({cols}) FROM '{literal}' "
        "(FORMAT csv, HEADER false, DELIMITER ',', QUOTE '\"', ESCAPE '\"', NULL '')"
    )


def _write_duckdb(target: Path, ddl: Iterable[str], tables: dict[str, TableData]) -> Path:
    """Build the database under a temp name, then rename it into place: never a half-written file."""
    import duckdb

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        conn = duckdb.connect(str(tmp), config={"threads": 1})
        try:
            for statement in ddl:
                conn.execute(statement)
            with tempfile.TemporaryDirectory(prefix="nl2sql-demo-") as folder:
                for name, data in tables.items():  # parents first, for the foreign keys
                    _load_csv(conn, name, data, Path(folder))
            conn.execute("CHECKPOINT")
        finally:
            conn.close()
        # A stale write-ahead log beside the target would be replayed onto the new file.
        with contextlib.suppress(FileNotFoundError):
            Path(f"{target}.wal").unlink()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return target


def write_support(target: Path, customers: Sequence[ChinookCustomer], seed: int = DEMO_SEED) -> Path:
    return _write_duckdb(target, SUPPORT_DDL, build_support(customers, seed))


def write_webanalytics(target: Path, customers: Sequence[ChinookCustomer], seed: int = DEMO_SEED) -> Path:
    return _write_duckdb(target, WEBANALYTICS_DDL, build_webanalytics(customers, seed))


WRITERS = {"support": write_support, "webanalytics": write_webanalytics}


def write_demo_databases(
    out_dir: Path,
    *,
    chinook: Path | None = None,
    seed: int = DEMO_SEED,
    which: Iterable[str] = ("support", "webanalytics"),
) -> dict[str, Path]:
    """Generate the synthetic databases into ``out_dir``; Chinook (checked) supplies the customers."""
    customers = read_chinook_customers(resolve_chinook(chinook))
    return {name: WRITERS[name](Path(out_dir) / DEMO_FILES[name][1], customers, seed) for name in which}


def copy_chinook(source: Path, target: Path) -> Path:
    """Copy a checked Chinook file into place atomically, and check the copy too."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        shutil.copyfile(source, tmp)
        if sha256_file(tmp) != CHINOOK_SHA256:
            raise DemoError(f"copying {source} to {target} produced a different file; nothing was replaced")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target
