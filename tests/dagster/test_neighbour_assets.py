"""The neighbour assets on a demo project: each datasource a suite's gold reads gets its kept set
(K, files and sizes, mutants separated), each suite with gold its neighbour rows and audit; both
come before the suite's case runs, are read back while nothing changed, and made anew when the
gold changes; the case runs grade on them."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from tests.dagster.test_graph import _materialized, _run


def test_neighbour_assets_come_before_the_case_runs_and_are_reused_until_the_gold_changes(
        demo_project: Path, instance: dg.DagsterInstance) -> None:
    shutil.rmtree(demo_project / "warehouse" / "neighbours", ignore_errors=True)  # made by this test
    defs = build_defs(demo_project / "nl2sql.yaml")
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    # only Chinook's gold exists among the demo's suites; the probe and clarify suites have none
    assert {k for k in keys if "neighbour" in k} == {"chinook/neighbours", "chinook/neighbour_rows"}
    assert dg.AssetKey(["chinook", "neighbour_rows"]) in graph.get(dg.AssetKey(["chinook", "case_runs"])).parent_keys
    assert graph.get(dg.AssetKey(["chinook", "neighbours"])).group_name == "chinook_db"

    first = _materialized(_run(defs, "datasets_job", instance))
    made = first["chinook/neighbours"]
    assert made["reused"] is False and 1 <= made["kept"] <= made["K"] == 10
    # at most K kept: nearly all the candidates separate (the witness search takes the rest, test_witness_search)
    assert made["separated"] >= 0.97 * made["separable"] and made["separated"] > made["separated_on_original"]
    assert made["rows_kept"] > 0 and made["bytes_kept"] > 0 and "| neighbour_00.sqlite |" in made["files"]
    rows = first["chinook/neighbour_rows"]
    assert rows["cases"] == rows["graded_on_neighbours"] == 43 and rows["audit_flags"] == 0
    assert Path(rows["audit_file"]).is_file()

    again = _materialized(_run(defs, "datasets_job", instance))
    assert again["chinook/neighbours"]["reused"] is True
    assert again["chinook/neighbours"]["folder"] == made["folder"]

    # the case runs of config plans grade on the same set: every plan's SQL holds on each neighbour
    register_configs(instance, ["plans"])
    runs = _run(defs, "case_runs_job", instance, partition=config_pass_key("plans", 1))
    assert runs.success
    from nl2sql_assets.evaluation.history import Warehouse

    records, _ = Warehouse.for_project(demo_project).read_pass("chinook", "plans", 1)
    graded = [r for r in records if "neighbour_match" in r.scores and r.scores["neighbour_match"].applies]
    assert len(graded) == 93 and all(r.scores["neighbour_match"].passed for r in graded)

    # another gold: another set
    suite = demo_project / "suites" / "chinook.yaml"
    text = suite.read_text(encoding="utf-8")
    assert "\n    LIMIT 5\n" in text
    suite.write_text(text.replace("\n    LIMIT 5\n", "\n    LIMIT 6\n", 1), encoding="utf-8")
    third = _materialized(_run(build_defs(demo_project / "nl2sql.yaml"), "datasets_job", instance))
    assert third["chinook/neighbours"]["reused"] is False
    assert third["chinook/neighbours"]["folder"] != made["folder"]
