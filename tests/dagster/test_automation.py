"""Sensors, the nightly schedule, partitions and config names."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from nl2sql_assets.config import ConfigNameError, validate_config_name
from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.partitions import CONFIGS, register_configs


@pytest.mark.parametrize("name", ["plans", "gpt-5.4", "gpt-5.4-mini-helpers", "claude_planner", "a.b-c_d"])
def test_good_config_names(name: str):
    assert validate_config_name(name) == name


@pytest.mark.parametrize("name", ["a|b", "a,b", "a...b", "has space", "", "x" * 65, "ünï", "a/b", ".."])
def test_bad_config_names_are_a_clear_error(name: str):
    with pytest.raises(ConfigNameError, match="invalid config name"):
        validate_config_name(name)


def test_register_refuses_a_bad_name_before_adding_anything(instance):
    with pytest.raises(ConfigNameError):
        register_configs(instance, ["good", "bad|name"])
    assert instance.get_dynamic_partitions(CONFIGS.name) == []


def test_new_baseline_starts_exactly_one_gate_run_and_the_next_tick_none(demo_project: Path, instance):
    defs = build_defs(demo_project / "nl2sql.yaml")
    sensor = defs.resolve_sensor_def("new_baseline_sensor")
    folder = demo_project / "benchmarks" / "plans" / "chinook"
    folder.mkdir(parents=True)

    first = sensor(dg.build_sensor_context(instance=instance, cursor=None, definitions=defs))
    assert first.run_requests == []

    (folder / "2026-11-29_abcdef0_plans.json").write_text(json.dumps({"schema": 2}), encoding="utf-8")
    second = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor, definitions=defs))
    assert len(second.run_requests) == 1
    assert second.run_requests[0].job_name in (None, "regression_gate_job")
    assert "2026-11-29_abcdef0_plans.json" in second.run_requests[0].run_key

    third = sensor(dg.build_sensor_context(instance=instance, cursor=second.cursor, definitions=defs))
    assert third.run_requests == []


def test_records_already_there_on_the_first_tick_start_nothing(demo_project: Path, instance):
    """`dagster dev` on a checkout with committed records: the first tick only notes them."""
    defs = build_defs(demo_project / "nl2sql.yaml")
    sensor = defs.resolve_sensor_def("new_baseline_sensor")
    folder = demo_project / "benchmarks" / "plans" / "chinook"
    folder.mkdir(parents=True)
    old = folder / "2026-11-28_abcdef0_plans.json"
    old.write_text(json.dumps({"schema": 2}), encoding="utf-8")

    first = sensor(dg.build_sensor_context(instance=instance, cursor=None, definitions=defs))
    assert first.run_requests == [] and first.skip_reason is None
    assert "plans/chinook/2026-11-28_abcdef0_plans.json" in json.loads(first.cursor)
    again = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor, definitions=defs))
    assert again.run_requests == [] and again.skip_reason is None

    os.utime(old, (old.stat().st_atime, old.stat().st_mtime + 10))  # the record changed after the start
    changed = sensor(dg.build_sensor_context(instance=instance, cursor=again.cursor, definitions=defs))
    assert len(changed.run_requests) == 1


def test_the_nightly_scoreboard_sensor_passes_over_other_runs_quietly(demo_project: Path, instance):
    defs = build_defs(demo_project / "nl2sql.yaml")
    sensor = defs.resolve_sensor_def("scoreboard_after_nightly")
    run = dg.DagsterRun(job_name="case_runs_job", tags={"dagster/partition/config": "plans"})
    event = dg.DagsterEvent(event_type_value="PIPELINE_SUCCESS", job_name="case_runs_job")
    ctx = dg.build_run_status_sensor_context(sensor_name="scoreboard_after_nightly", dagster_instance=instance,
                                             dagster_run=run, dagster_event=event)
    assert sensor(ctx) is None  # a launch from the UI: nothing to do, no skip message
    nightly = dg.build_run_status_sensor_context(
        sensor_name="scoreboard_after_nightly", dagster_instance=instance, dagster_event=event,
        dagster_run=dg.DagsterRun(job_name="case_runs_job", run_id="r1",
                                  tags={"dagster/partition/config": "plans", "nl2sql/nightly": "true"}))
    request = sensor(nightly)
    assert (request.partition_key, request.run_key) == ("plans", "scoreboards:r1")


def test_config_sensor_registers_key_free_configs_presets_and_project_files(demo_project: Path, instance):
    (demo_project / "configs").mkdir()
    (demo_project / "configs" / "my-model.yaml").write_text(
        "default: {model: openai/gpt-4o-mini}\n", encoding="utf-8")
    defs = build_defs(demo_project / "nl2sql.yaml")
    sensor = defs.resolve_sensor_def("llm_config_sensor")
    with dg.build_sensor_context(instance=instance, definitions=defs,
                                 resources={"project": defs.resources["project"]}) as ctx:
        result = sensor(ctx)
    (request,) = result.dynamic_partitions_requests
    assert request.partitions_def_name == "llm_config"
    assert {"plans", "retrieval", "gpt-5.4", "my-model"} <= set(request.partition_keys)


def test_nightly_schedule_requests_the_key_free_configs_pass_one(demo_project: Path, instance):
    defs = build_defs(demo_project / "nl2sql.yaml")
    schedule = defs.resolve_schedule_def("nightly_keyfree")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.execution_timezone == "UTC"
    ctx = dg.build_schedule_context(instance=instance, repository_def=defs.get_repository_def(),
                                    scheduled_execution_time=datetime(2026, 11, 29, 2, tzinfo=UTC))
    requests = list(schedule.evaluate_tick(ctx).run_requests)
    assert [r.partition_key for r in requests] == ["plans|1", "retrieval|1"]
    assert [r.run_key for r in requests] == ["nightly:2026-11-29:plans:1", "nightly:2026-11-29:retrieval:1"]
    assert all(r.tags["nl2sql/nightly"] == "true" for r in requests)
    # each run says what it uses: its mode, and no paid model (the key-free configs)
    assert [(r.tags["nl2sql/mode"], r.tags["nl2sql/llm"]) for r in requests] == [("plans", "false"),
                                                                                ("retrieval", "false")]
    assert {"plans", "retrieval"} <= set(instance.get_dynamic_partitions("llm_config"))


@pytest.mark.parametrize(("mode", "llm"), [("full", "true"), ("plans", "false"), ("retrieval", "false")])
def test_a_run_is_tagged_with_what_its_mode_uses(mode: str, llm: str) -> None:
    from nl2sql_assets.defs.evals import run_tags

    assert run_tags(mode) == {"nl2sql/mode": mode, "nl2sql/llm": llm}


def test_definitions_validate_and_default_statuses(demo_project: Path):
    defs = build_defs(demo_project / "nl2sql.yaml")
    defs.resolve_all_job_defs()
    assert defs.resolve_sensor_def("new_baseline_sensor").default_status == dg.DefaultSensorStatus.RUNNING
    assert defs.resolve_schedule_def("nightly_keyfree").default_status == dg.DefaultScheduleStatus.STOPPED
    keys = {"/".join(k.path) for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"chinook/case_runs", "chinook/scoreboards", "chinook/eval_report", "chinook/benchmark_records",
            "chinook/suite", "chinook/regenerated_rows", "demo_datasets", "chinook/schema_snapshot"} <= keys


def test_dagster_yaml_caps_llm_work_with_a_pool_and_the_run_queue(tmp_path: Path, demo_project: Path, monkeypatch):
    """The shipped instance settings: the llm pool holds two steps, the queue four runs (two LLM-tagged),
    and case_runs carries the pool, so backfills and UI launches are capped too."""
    import shutil

    repo = Path(__file__).resolve().parents[2]
    shutil.copyfile(repo / "scripts" / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # where the file lives, and its storage (base_dir)
    with dg.DagsterInstance.from_config(str(tmp_path)) as inst:
        cfg = inst.get_concurrency_config()
    assert cfg.pool_config.default_pool_limit == 2
    assert cfg.run_queue_config.max_concurrent_runs == 4
    assert cfg.run_queue_config.tag_concurrency_limits == [{"key": "nl2sql/llm", "value": "true", "limit": 2}]

    defs = build_defs(demo_project / "nl2sql.yaml")
    case_runs = defs.resolve_assets_def(dg.AssetKey(["chinook", "case_runs"]))
    assert case_runs.op.pool == "llm"
    # no static tag on the job: each run the project launches says what it uses (run_tags)
    assert "nl2sql/llm" not in defs.resolve_job_def("case_runs_job").tags
    assert case_runs.backfill_policy == dg.BackfillPolicy.multi_run(1)


def test_the_code_location_name_is_the_one_pyproject_and_workspace_give() -> None:
    """Runs made by the pipeline are filed under this name: it must be the location the UI loads."""
    import tomllib

    import yaml

    from nl2sql_assets.defs.keys import CODE_LOCATION

    repo = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["dg"]["project"]["code_location_name"] == CODE_LOCATION
    workspace = yaml.safe_load((repo / "workspace.yaml").read_text(encoding="utf-8"))
    assert [entry["python_module"]["location_name"] for entry in workspace["load_from"]] == [CODE_LOCATION]
