"""The inputs keys and records behind the dataset steps' reuse (``evaluation.history.reuse``)."""

from __future__ import annotations

from pathlib import Path

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.evaluation.history.reuse import (
    StepRecords,
    database_digest,
    regenerated_rows_key,
    snapshot_key,
)


def _sqlite(tmp_path: Path, name: str = "db.sqlite") -> DatasourceConfig:
    import sqlite3

    path = tmp_path / name
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
    conn.close()
    return DatasourceConfig(id="db", engine="sqlite", path=path)


def test_the_snapshot_key_follows_the_contents_and_settings_not_the_path(tmp_path: Path):
    ds = _sqlite(tmp_path)
    key = snapshot_key(ds)
    assert snapshot_key(ds) == key
    moved = tmp_path / "elsewhere.sqlite"
    moved.write_bytes(ds.path.read_bytes())
    assert snapshot_key(ds.model_copy(update={"path": moved})) == key  # the same bytes elsewhere
    assert snapshot_key(ds.model_copy(update={"row_limit": 5})) != key  # another setting
    import sqlite3

    with sqlite3.connect(ds.path) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    assert snapshot_key(ds) != key  # other contents


def test_a_write_ahead_log_beside_the_database_is_part_of_its_digest(tmp_path: Path):
    ds = _sqlite(tmp_path)
    alone = database_digest(ds)
    Path(f"{ds.path}-wal").write_bytes(b"committed pages")
    assert database_digest(ds) != alone


def test_the_rows_key_follows_the_suite_file_and_every_datasource(tmp_path: Path):
    ds = _sqlite(tmp_path)
    other = _sqlite(tmp_path, "other.sqlite").model_copy(update={"id": "other"})
    suite = tmp_path / "suite.yaml"
    suite.write_text("cases: []\n")
    key = regenerated_rows_key(suite, [ds, other])
    assert regenerated_rows_key(suite, [other, ds]) == key  # the order of the datasources aside
    assert regenerated_rows_key(suite, [ds]) != key
    suite.write_text("cases: []\n# a comment\n")
    assert regenerated_rows_key(suite, [ds, other]) != key


def test_a_record_is_reused_only_with_its_key_and_its_output_unchanged(tmp_path: Path):
    records = StepRecords(tmp_path / "steps")
    output = tmp_path / "out.json"
    assert records.lookup("step", "k1", output) is None  # nothing stored
    output.write_text('{"a": 1}')
    records.store("step", "k1", output, {"n": 3})
    hit = records.lookup("step", "k1", output)
    assert hit is not None and hit.data == {"n": 3} and hit.output == b'{"a": 1}'
    assert records.lookup("step", "k2", output) is None  # other inputs
    output.write_text('{"a": 2}')
    assert records.lookup("step", "k1", output) is None  # the output edited
    output.unlink()
    assert records.lookup("step", "k1", output) is None  # the output gone


def test_another_code_or_library_version_is_another_key(tmp_path: Path, monkeypatch) -> None:
    from nl2sql_assets.evaluation.history import reuse

    ds = _sqlite(tmp_path)
    key = snapshot_key(ds)
    monkeypatch.setattr(reuse, "code_digest", lambda: "another code version")
    assert snapshot_key(ds) != key
    monkeypatch.undo()
    monkeypatch.setattr(reuse, "library_versions", lambda: {"duckdb": "0.0.1"})
    assert snapshot_key(ds) != key
