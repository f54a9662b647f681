"""Dataset steps reuse their stored result while their inputs are unchanged: the schema snapshots
and the suite's regenerated rows. A reused result is the one recomputing gives; a changed suite,
database or output file is computed again."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.evaluation.history import Warehouse

STEPS = ("chinook/schema_snapshot", "support/schema_snapshot", "webanalytics/schema_snapshot",
         "chinook/regenerated_rows")


def _datasets(demo_project: Path, instance: dg.DagsterInstance) -> dict[str, dict]:
    result = build_defs(demo_project / "nl2sql.yaml").resolve_job_def("datasets_job").execute_in_process(
        instance=instance, raise_on_error=False)
    assert result.success
    mats = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    return {"/".join(m.asset_key.path): {k: v.value for k, v in m.metadata.items()} for m in mats}


def _outputs(demo_project: Path) -> dict[str, bytes]:
    warehouse = Warehouse.for_project(demo_project)
    files = [warehouse.snapshot_path(ds) for ds in ("chinook", "support", "webanalytics")]
    files.append(warehouse.regenerated_suite_path("chinook"))
    return {f.name: f.read_bytes() for f in files}


def _without_reuse(metadata: dict) -> dict:
    return {k: v for k, v in metadata.items() if k not in ("reused", "reuse")}


def test_unchanged_inputs_reuse_the_stored_results_identical_to_recomputing(demo_project: Path, instance):
    first = _datasets(demo_project, instance)
    assert {step: first[step]["reused"] for step in STEPS} == dict.fromkeys(STEPS, False)
    computed = _outputs(demo_project)

    again = _datasets(demo_project, instance)
    assert {step: again[step]["reused"] for step in STEPS} == dict.fromkeys(STEPS, True)
    assert "unchanged" in again["chinook/regenerated_rows"]["reuse"]
    assert _outputs(demo_project) == computed
    for step in STEPS:
        assert _without_reuse(again[step]) == _without_reuse(first[step]), step

    # Forget what was stored: recomputing gives the very files and metadata that were reused.
    for record in (demo_project / "warehouse" / "cache" / "steps").iterdir():
        record.unlink()
    recomputed = _datasets(demo_project, instance)
    assert {step: recomputed[step]["reused"] for step in STEPS} == dict.fromkeys(STEPS, False)
    assert _outputs(demo_project) == computed
    for step in STEPS:
        assert _without_reuse(recomputed[step]) == _without_reuse(again[step]), step


def test_a_changed_suite_file_regenerates_its_rows(demo_project: Path, instance):
    _datasets(demo_project, instance)
    suite = demo_project / "suites" / "chinook.yaml"
    text = suite.read_text(encoding="utf-8")
    # chinook_001 counts customers per country; USA has 13. A stale committed row:
    assert "customer_count: 13}" in text
    suite.write_text(text.replace("customer_count: 13}", "customer_count: 12}", 1), encoding="utf-8")

    mats = _datasets(demo_project, instance)
    assert mats["chinook/regenerated_rows"]["reused"] is False
    assert mats["chinook/regenerated_rows"]["matches_suite_file"] is False  # the copy has the true count
    assert mats["chinook/schema_snapshot"]["reused"] is True  # its database did not change
    copy = Warehouse.for_project(demo_project).regenerated_suite_path("chinook").read_text(encoding="utf-8")
    assert "customer_count: 13}" in copy


def test_a_changed_database_takes_its_snapshot_and_the_rows_again(demo_project: Path, instance):
    import duckdb

    first = _datasets(demo_project, instance)
    with duckdb.connect(str(demo_project / "data" / "webanalytics.duckdb")) as conn:
        conn.execute("CREATE TABLE campaigns (campaign_id INTEGER PRIMARY KEY, name VARCHAR)")

    mats = _datasets(demo_project, instance)
    assert mats["webanalytics/schema_snapshot"]["reused"] is False
    assert mats["webanalytics/schema_snapshot"]["tables"] == first["webanalytics/schema_snapshot"]["tables"] + 1
    snapshot = json.loads(Warehouse.for_project(demo_project).snapshot_path("webanalytics").read_text())
    assert "campaigns" in [t["name"] for t in snapshot["tables"]]
    assert mats["chinook/regenerated_rows"]["reused"] is False  # its rows may come from any database
    assert mats["chinook/schema_snapshot"]["reused"] is True
    assert mats["support/schema_snapshot"]["reused"] is True


def test_an_edited_or_missing_output_is_computed_again(demo_project: Path, instance):
    _datasets(demo_project, instance)
    computed = _outputs(demo_project)
    warehouse = Warehouse.for_project(demo_project)
    warehouse.regenerated_suite_path("chinook").write_text("cases: []\n", encoding="utf-8")
    warehouse.snapshot_path("support").unlink()

    mats = _datasets(demo_project, instance)
    assert mats["chinook/regenerated_rows"]["reused"] is False
    assert mats["support/schema_snapshot"]["reused"] is False
    assert mats["chinook/schema_snapshot"]["reused"] is True
    assert _outputs(demo_project) == computed


@pytest.mark.parametrize("damage", ["not json", json.dumps({"format": 1, "key": "other"}), json.dumps([1])])
def test_a_damaged_record_only_costs_a_recomputation(demo_project: Path, instance, damage: str):
    _datasets(demo_project, instance)
    (demo_project / "warehouse" / "cache" / "steps" / "regenerated_rows-chinook.json").write_text(damage)
    mats = _datasets(demo_project, instance)
    assert mats["chinook/regenerated_rows"]["reused"] is False
    assert mats["chinook/regenerated_rows"]["failed"] == 0
    assert _datasets(demo_project, instance)["chinook/regenerated_rows"]["reused"] is True  # stored again
