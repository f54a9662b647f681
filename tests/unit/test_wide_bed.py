"""The wide test bed as a user of it would check it: 1,200 tables over six SQLite and DuckDB
datasources, names a warehouse really has (and repeats across datasources), foreign keys that
hold, rows that join, the same bed on every build, and a folder reused or refused as it should be."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.project import Project
from nl2sql_assets.testbed.wide import FULL_TABLES, VARIANTS, WideBedError, bed_tables, build_wide, parse_core
from nl2sql_assets.testbed.wide_schema import SOURCES


def _snapshots(bed: Any) -> dict[str, Any]:
    project = Project.load(bed.config)
    with DatasourceRegistry(project.config) as registry:
        return {ds: registry.snapshot(ds) for ds in registry.ids}


def _rows_digest(bed: Any) -> str:
    """SHA-256 over every core table's rows, read back from the files."""
    digest = hashlib.sha256()
    for source in SOURCES:
        path = bed.root / "data" / f"{source.id}.{source.engine}"
        con = sqlite3.connect(path) if source.engine == "sqlite" else duckdb.connect(str(path), read_only=True)
        try:
            for line in source.tables:
                table = parse_core(line)
                rows = con.execute(f'SELECT * FROM "{table.name}" ORDER BY 1').fetchall()
                digest.update(json.dumps([table.name, rows], default=str).encode())
        finally:
            con.close()
    return digest.hexdigest()


def test_the_bed_has_1200_tables_over_six_sqlite_and_duckdb_datasources(wide_bed: Any) -> None:
    snapshots = _snapshots(wide_bed)
    assert sum(len(s.tables) for s in snapshots.values()) == FULL_TABLES == wide_bed.table_count
    assert len(snapshots) == 6
    assert Counter(s.engine for s in snapshots.values()) == {"sqlite": 3, "duckdb": 3}
    for ds, snapshot in snapshots.items():
        names = [t.name for t in snapshot.tables]
        assert len(names) == len(set(names)) == 200, ds


def test_names_repeat_across_datasources_as_in_a_company_warehouse(wide_bed: Any) -> None:
    holders: dict[str, set[str]] = {}
    for ds, snapshot in _snapshots(wide_bed).items():
        for table in snapshot.tables:
            holders.setdefault(table.name, set()).add(ds)
    assert holders["customers"] == {"finance", "ecommerce", "support_desk"}
    assert holders["invoices"] == {"finance", "ecommerce"}
    assert {"stg_customers", "customers_history", "agg_customers_monthly"} <= set(holders)
    # and within one datasource, the core table beside what a warehouse grows around it
    crm = {t.name for t in _snapshots(wide_bed)["crm"].tables}
    assert {"opportunities", "stg_opportunities", "opportunities_history", "opportunities_audit",
            "agg_opportunities_monthly", "opportunities_snapshot_daily"} <= crm


def test_every_foreign_key_names_a_key_of_its_own_datasource_and_its_rows_join(wide_bed: Any) -> None:
    snapshots = _snapshots(wide_bed)
    total = 0
    for source in SOURCES:
        tables = {t.name: t for t in snapshots[source.id].tables}
        path = wide_bed.root / "data" / f"{source.id}.{source.engine}"
        con = sqlite3.connect(path) if source.engine == "sqlite" else duckdb.connect(str(path), read_only=True)
        try:
            for table in tables.values():
                for fk in table.foreign_keys:
                    total += 1
                    parent = tables[fk.ref_table]
                    assert fk.ref_columns == parent.primary_key, (source.id, table.name, fk)
                    (orphans,) = con.execute(
                        f'SELECT COUNT(*) FROM "{table.name}" AS c LEFT JOIN "{parent.name}" AS p '
                        f'ON p."{fk.ref_columns[0]}" = c."{fk.columns[0]}" WHERE p."{fk.ref_columns[0]}" IS NULL'
                    ).fetchone()
                    assert orphans == 0, (source.id, table.name, fk)
        finally:
            con.close()
    assert total >= 90  # every core table's references, in both engines


def test_core_tables_hold_rows_and_variants_are_empty(wide_bed: Any) -> None:
    con = sqlite3.connect(wide_bed.root / "data" / "crm.sqlite")
    try:
        assert con.execute('SELECT COUNT(*) FROM "opportunities"').fetchone() == (40,)
        assert con.execute('SELECT COUNT(*) FROM "stg_opportunities"').fetchone() == (0,)
        stages = {r[0] for r in con.execute('SELECT DISTINCT stage FROM "opportunities"')}
        assert "closed won" in stages and len(stages) > 3  # values a question can filter on
    finally:
        con.close()


def test_every_build_is_the_same_bed(wide_bed: Any, tmp_path: Path) -> None:
    again = build_wide(tmp_path / "again")
    assert not again.reused
    first = {ds: s.fingerprint() for ds, s in _snapshots(wide_bed).items()}
    assert {ds: s.fingerprint() for ds, s in _snapshots(again).items()} == first
    assert _rows_digest(again) == _rows_digest(wide_bed)
    assert (again.root / "nl2sql.yaml").read_text() == (wide_bed.root / "nl2sql.yaml").read_text().replace(
        str(wide_bed.root), str(again.root))


@pytest.mark.parametrize("total", [100, 400, 1200])
def test_a_narrower_bed_keeps_every_core_table_and_takes_the_variants_in_order(total: int) -> None:
    tables = bed_tables(total)
    full = bed_tables(FULL_TABLES)
    assert sum(len(t) for t in tables.values()) == total
    for source in SOURCES:
        names = [t.name for t in tables[source.id]]
        assert names == [t.name for t in full[source.id]][:len(names)]  # a prefix of the full bed
        cores = [parse_core(line).name for line in source.tables]
        assert names[:len(cores)] == cores


def test_variants_are_what_a_warehouse_grows(wide_bed: Any) -> None:
    crm = {t.name: t for t in bed_tables()["crm"]}
    assert len(VARIANTS) * 16 + 16 <= 200
    history = crm["opportunities_history"]
    assert [c for c, _ in history.columns][-2:] == ["valid_from", "valid_to"]
    assert not history.foreign_keys and history.primary_key is None
    assert any(name.startswith("ref_") for name in crm)  # code lists


@pytest.mark.parametrize("total", [95, 5000])
def test_a_table_count_out_of_range_is_refused_with_the_range(total: int, tmp_path: Path) -> None:
    with pytest.raises(WideBedError, match=rf"holds 96 to 4800 tables, not {total}"):
        build_wide(tmp_path / "bed", total_tables=total)


def test_a_folder_is_reused_rebuilt_or_refused(wide_bed: Any, tmp_path: Path) -> None:
    assert build_wide(wide_bed.root).reused  # the same version's bed: nothing written
    stranger = tmp_path / "mine"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("not a bed")
    with pytest.raises(WideBedError, match=r"not empty and not a wide bed"):
        build_wide(stranger)
    assert (stranger / "notes.txt").read_text() == "not a bed"  # untouched
    cut = build_wide(tmp_path / "cut", total_tables=100)
    (cut.root / "manifest.json").unlink()  # as if the build was cut off before its last step
    rebuilt = build_wide(cut.root, total_tables=100)
    assert not rebuilt.reused and (cut.root / "manifest.json").is_file()
    other = build_wide(cut.root, total_tables=400)  # another size in the same folder: rebuilt
    assert not other.reused and other.table_count == 400
