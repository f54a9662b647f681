"""An engine named in nl2sql.yaml is a partition of the config dimension: the case runs, the
scoreboard (with the gate) and the stored report work on it unchanged, priced by what it reports."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from nl2sql_assets.evaluation.reporting import load_report
from nl2sql_assets.evaluation.running.modes import discover_configs
from nl2sql_assets.evaluation.suites import load_suite
from nl2sql_assets.project import Project
from tests.engine_servers import RecordingEngine


def _materialized(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    mats = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    return {"/".join(m.asset_key.path): {k: v.value for k, v in m.metadata.items()} for m in mats}


def test_an_engine_is_a_config_partition(demo_project: Path, instance: dg.DagsterInstance) -> None:
    suite = load_suite(demo_project / "suites" / "chinook.yaml")
    # SQL only, the gold SQL for every answerable question (whatever the role: the leaks are the policy's to catch)
    engine = RecordingEngine({c.question: c.sql for c in suite.approved if c.kind == "answer" and c.sql
                              and not c.turns})
    try:
        path = demo_project / "nl2sql.yaml"
        data = yaml.safe_load(path.read_text())
        data["engines"] = {"vendor": {"kind": "http", "url": f"http://127.0.0.1:{engine.server_address[1]}",
                                      "reports_cost": True}}
        path.write_text(yaml.safe_dump(data))
        with Project.load(path) as project:
            assert "vendor" in discover_configs(project.config)
        defs = build_defs(path)
        register_configs(instance, ["vendor"])
        runs = defs.resolve_job_def("case_runs_job").execute_in_process(
            instance=instance, partition_key=config_pass_key("vendor", 1), raise_on_error=False)
        assert runs.success
        case_runs = _materialized(runs)["chinook/case_runs"]
        boards = defs.resolve_job_def("scoreboards_job").execute_in_process(
            instance=instance, partition_key="vendor", raise_on_error=False)
        assert boards.success
    finally:
        engine.shutdown()
        engine.server_close()

    stored = load_report(demo_project / "warehouse" / "reports" / "chinook" / "vendor.json")
    board = stored.configs["vendor"]
    asked = len(engine.headers_seen)
    # every case run and each follow-up's earlier turns went to the engine (probes go to the policy
    # only), those of the clarify suite's partition too
    clarify = load_report(demo_project / "warehouse" / "reports" / "chinook_clarify" / "vendor.json")
    results = [*board.results, *clarify.configs["vendor"].results]
    assert asked == sum(1 + r.warmup_turns for r in results if r.kind != "probe") > 100
    leaks = [r for r in board.results if r.error_code == "ENGINE_LEAK"]
    refused_roles = [r for r in board.results if r.expected == "refused" and r.kind == "answer"]
    assert leaks and len(leaks) <= len(refused_roles)  # the engine never refuses: each leak is a refused role's
    assert all(r.status == "fail" for r in leaks)
    assert board.cost.total_usd > 0
    assert case_runs["cost_usd"] == pytest.approx(board.cost.total_usd, rel=1e-3)  # shown to 4 significant figures
    assert case_runs["mode"] == "full"
