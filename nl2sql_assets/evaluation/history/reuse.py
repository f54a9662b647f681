"""Dataset steps whose result is a pure function of their inputs, kept and reused while those
inputs are unchanged.

A schema snapshot is a function of its database file, the datasource's settings, the code and
the libraries that compute it (the database engines, the SQL parser, YAML, pydantic); a suite's
regenerated rows are a function of the suite file, every datasource's database and settings, the
code and those libraries. Each such step stores, beside its output, a record of an inputs key (a
SHA-256 over all of those: file contents, not their paths or times) and of the output file's own
SHA-256. The
next run with the same key and the output file byte for byte as it was written reuses the
result instead of recomputing it; anything else (a changed suite or database, another library or
code version, an output edited or removed, a damaged record) recomputes. So a reused result is
the file the same computation wrote, and the step says it was reused.

Records live under ``warehouse/cache/steps/`` (git-ignored like the rest of the warehouse),
written atomically; a record that cannot be read or written only costs a recomputation.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.redact import get_logger

log = get_logger(__name__)

#: Bumped when a record's layout or what a key covers changes.
FORMAT = 1
_PACKAGE = Path(__file__).resolve().parents[2]  # nl2sql_assets/


# ---------------------------------------------------------------- digests


def _stat_identity(path: Path) -> tuple[int, ...]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.lru_cache(maxsize=64)
def _file_sha256(path: str, identity: tuple[int, ...]) -> str:
    """SHA-256 of a file's bytes; cached per process by the file's identity (device, inode,
    size, modification and change times), so one process hashes an unchanged file once."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | Path) -> str:
    path = Path(path)
    return _file_sha256(str(path), _stat_identity(path))


def database_digest(datasource: DatasourceConfig) -> str:
    """The database's contents: its file and any write-ahead log beside it (SQLite's ``-wal``,
    DuckDB's ``.wal``), whose committed pages are part of what a reader sees. A server's contents
    have no digest a client can take cheaply: each call gives a new value, so nothing computed
    from a server is ever reused."""
    if datasource.path is None:
        import uuid

        return f"live:{uuid.uuid4().hex}"
    path = Path(datasource.path)
    parts = [file_sha256(path)]
    for sidecar in (Path(f"{path}-wal"), Path(f"{path}.wal")):
        if sidecar.is_file():
            parts.append(f"{sidecar.name[len(path.name):]}:{file_sha256(sidecar)}")
    return "+".join(parts)


@functools.cache
def code_digest() -> str:
    """SHA-256 over every Python source of nl2sql_assets: any change to the code (the
    introspection, the suite model, the YAML it writes, the policy rules it validates with) is a
    change of every step's inputs. About 1 MB, read once per process."""
    digest = hashlib.sha256()
    for file in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(file.relative_to(_PACKAGE)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def library_versions() -> dict[str, str]:
    """The versions of what computes a snapshot or a suite's rows besides our code: the database
    engines, the SQL parser, the YAML library and pydantic (all imported by then)."""
    import duckdb
    import pydantic
    import sqlglot
    import yaml

    return {"sqlite": sqlite3.sqlite_version, "duckdb": duckdb.__version__, "sqlglot": sqlglot.__version__,
            "pyyaml": yaml.__version__, "pydantic": pydantic.VERSION}


def datasource_inputs(datasource: DatasourceConfig) -> dict[str, Any]:
    """One datasource as a step's input: its settings (the path aside: where the file lies
    changes nothing) and its database's digest."""
    settings = datasource.model_dump(mode="json", exclude={"path"})
    return {"settings": settings, "database": database_digest(datasource)}


def inputs_key(step: str, parts: Mapping[str, Any]) -> str:
    """The SHA-256 of a step's name, the record format and its inputs (canonical JSON)."""
    text = json.dumps({"format": FORMAT, "step": step, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def snapshot_key(datasource: DatasourceConfig) -> str:
    """The inputs of one datasource's schema snapshot."""
    return inputs_key("schema_snapshot", {
        "datasource": datasource_inputs(datasource),
        "code": code_digest(),
        "libraries": library_versions(),
    })


def regenerated_rows_key(suite: str | Path, datasources: Iterable[DatasourceConfig]) -> str:
    """The inputs of a suite's regenerated rows: the suite file, every datasource, the code."""
    return inputs_key("regenerated_rows", {
        "suite": file_sha256(suite),
        "datasources": sorted((datasource_inputs(ds) | {"id": ds.id} for ds in datasources),
                              key=lambda d: d["id"]),
        "code": code_digest(),
        "libraries": library_versions(),
    })


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Hit:
    """A reusable result: the step's stored data and its output file's bytes."""

    data: dict[str, Any]
    output: bytes


class StepRecords:
    """One record per step output: ``<folder>/<name>.json`` holding the inputs key, the output's
    SHA-256 and the step's own result data (plain JSON)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}.json"

    def lookup(self, name: str, key: str, output: str | Path) -> Hit | None:
        """The stored result when the record's key is ``key`` and ``output`` holds, byte for byte,
        the file recorded (read once: what is checked is what is returned); None otherwise
        (compute the step)."""
        try:
            record = json.loads(self._path(name).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("step record %s unreadable (%s): computing the step", self._path(name), exc)
            return None
        if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != key:
            return None
        try:
            content = Path(output).read_bytes()
        except OSError:  # the output is gone
            return None
        data = record.get("data")
        if hashlib.sha256(content).hexdigest() != record.get("output_sha256") or not isinstance(data, dict):
            return None
        return Hit(data=data, output=content)

    def store(self, name: str, key: str, output: str | Path, data: Mapping[str, Any]) -> None:
        """Record a computed step (after its output is written). A record that cannot be written
        is skipped: the next run computes the step again."""
        record = {"format": FORMAT, "key": key, "output_sha256": file_sha256(output), "data": dict(data)}
        try:
            atomic_write(self._path(name), json.dumps(record, indent=1, sort_keys=True))
        except OSError as exc:
            log.warning("step record %s not written (%s)", self._path(name), exc)


# ---------------------------------------------------------------- the dataset steps


def snapshot_record_name(datasource_id: str) -> str:
    return f"schema_snapshot-{datasource_id}"


def regenerated_rows_record_name(suite_name: str) -> str:
    return f"regenerated_rows-{suite_name}"


def stored_snapshot(records: StepRecords, path: str | Path, datasource: DatasourceConfig) -> SchemaSnapshot | None:
    """The snapshot stored at ``path`` when its inputs are unchanged since it was taken; None
    when it must be taken again (read only: nothing is written)."""
    hit = records.lookup(snapshot_record_name(datasource.id), snapshot_key(datasource), path)
    if hit is None:
        return None
    try:
        return SchemaSnapshot.model_validate_json(hit.output)
    except ValueError:
        return None
