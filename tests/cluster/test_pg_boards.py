"""Boards from Postgres under the cluster profile: the scoreboard of a config built from the records
in Postgres (with this machine's record files gone) equals the embedded one-machine board, and a
machine that did not build a scoreboard gets it from Postgres for the gate."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from nl2sql_assets.evaluation.reporting import load_report
from tests.cluster.conftest import dsn

CLOCK = {"latency_s", "timings", "oracle_latency_s", "warmup"}  # what depends on the clock or process


def _comparable_board(path: Path) -> dict[str, Any]:
    """A stored scoreboard without what depends on the clock (latency, run stamps)."""
    report = load_report(path)
    (board,) = report.configs.values()
    data = board.model_dump(mode="json", exclude={"latency", "results"})
    data["averages"] = {k: v for k, v in data["averages"].items() if not k.endswith("latency_ms")}
    results = []
    for record in board.results:
        r = record.model_dump(mode="json", exclude=CLOCK)
        if r.get("generated"):
            r["generated"] = {k: v for k, v in r["generated"].items() if k not in CLOCK}
        results.append(r)
    return {"mode": report.mode, "passes": report.passes, "board": data, "results": results}


def _run_plans_board(project: Path, home: Path) -> dg.Definitions:
    """Datasets, case_runs plans|1 and plans|2, in-process (the sharded graph under the cluster
    profile: split, shards, merge); returns the definitions for the boards' jobs."""
    defs = build_defs(project / "nl2sql.yaml")
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        register_configs(instance, ["plans"])
        assert defs.resolve_job_def("datasets_job").execute_in_process(instance=instance).success
        for p in (1, 2):
            assert defs.resolve_job_def("case_runs_job").execute_in_process(
                instance=instance, partition_key=config_pass_key("plans", p)).success
    return defs


def _boards(defs: dg.Definitions, home: Path, job: str = "scoreboards_job", partition: str | None = "plans"):
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        register_configs(instance, ["plans"])
        return defs.resolve_job_def(job).execute_in_process(instance=instance, partition_key=partition,
                                                           raise_on_error=False)


def test_cluster_boards_read_postgres_and_equal_the_one_machine_boards(
        tmp_path: Path, demo_template: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch):
    embedded, cluster = tmp_path / "embedded", tmp_path / "cluster"
    shutil.copytree(demo_template, embedded)
    shutil.copytree(demo_template, cluster)
    for home in ("h1", "h2", "h3", "h4"):
        (tmp_path / home).mkdir()

    monkeypatch.delenv("NL2SQL_PROFILE", raising=False)
    defs = _run_plans_board(embedded, tmp_path / "h1")
    assert _boards(defs, tmp_path / "h1").success
    one_machine = embedded / "warehouse" / "reports" / "chinook" / "plans.json"

    monkeypatch.setenv("NL2SQL_PROFILE", "cluster")
    monkeypatch.setenv("NL2SQL_PG_DSN", dsn(pg_database))
    monkeypatch.setenv("NL2SQL_PG_SCHEMA", f"boards_{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("NL2SQL_SHARD_SIZE", "20")
    defs = _run_plans_board(cluster, tmp_path / "h2")
    # The merge wrote this machine's record files too; a board built elsewhere would not have
    # them. Without them the board must come from Postgres.
    shutil.rmtree(cluster / "warehouse" / "case_records")
    result = _boards(defs, tmp_path / "h2")
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    board = cluster / "warehouse" / "reports" / "chinook" / "plans.json"
    assert _comparable_board(board) == _comparable_board(one_machine)
    assert _comparable_board(board)["board"]["summary"]["total"]["pass"] > 0
    side_by_side = cluster / "warehouse" / "reports" / "chinook" / "_all.json"
    assert _comparable_board(side_by_side) == _comparable_board(
        embedded / "warehouse" / "reports" / "chinook" / "_all.json")

    # Another machine: no scoreboard file of its own. The gate over every config finds the board
    # in Postgres (there is no baseline in this project, so the gate only warns: it ran on it).
    shutil.rmtree(cluster / "warehouse" / "reports")
    gate = _boards(defs, tmp_path / "h3", job="regression_gate_job", partition=None)
    (evaluation,) = [e for e in gate.get_asset_check_evaluations() if e.asset_key == dg.AssetKey(["chinook", "scoreboards"])]
    assert "plans: no scoreboard yet" not in (evaluation.description or "")
    assert "plans:" in (evaluation.description or "")
    assert _comparable_board(board) == _comparable_board(one_machine)


def test_benchmark_records_pulls_the_board_from_postgres_on_a_machine_without_its_files(
        tmp_path: Path, demo_template: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch):
    """benchmark_records on a machine that built neither the records nor the board: the board
    comes from Postgres (pull_scoreboards) and is what gets recorded; without that pull the asset
    would find no scoreboard file and fail."""
    from nl2sql_assets.defs.keys import benchmark_records_key

    project = tmp_path / "cluster"
    shutil.copytree(demo_template, project)
    (tmp_path / "h").mkdir()
    monkeypatch.setenv("NL2SQL_PROFILE", "cluster")
    monkeypatch.setenv("NL2SQL_PG_DSN", dsn(pg_database))
    monkeypatch.setenv("NL2SQL_PG_SCHEMA", f"records_{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("NL2SQL_SHARD_SIZE", "60")
    defs = _run_plans_board(project, tmp_path / "h")
    assert _boards(defs, tmp_path / "h").success  # the board, built here and stored in Postgres
    board = project / "warehouse" / "reports" / "chinook" / "plans.json"
    built = _comparable_board(board)
    # Another machine: neither the record files nor the board file.
    shutil.rmtree(project / "warehouse" / "case_records")
    shutil.rmtree(project / "warehouse" / "reports")
    with dg.instance_for_test(temp_dir=str(tmp_path / "h")) as instance:
        register_configs(instance, ["plans"])
        result = defs.resolve_job_def("benchmark_records_job").execute_in_process(
            instance=instance, partition_key="plans", asset_selection=[benchmark_records_key("chinook")],
            run_config={"ops": {"chinook__benchmark_records": {"config": {"record": True, "note": "from postgres"}}}},
            raise_on_error=False)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    assert _comparable_board(board) == built  # pulled back from Postgres
    (record,) = sorted((project / "benchmarks" / "plans" / "chinook").glob("*.json"))
    assert "from postgres" in record.read_text(encoding="utf-8")
