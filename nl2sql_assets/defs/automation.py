"""Jobs, sensors and the nightly schedule.

Default status (see the README): the config sensor, the new-baseline sensor and the
scoreboard-after-nightly sensor run by default; the nightly schedule is off until someone turns
it on, so a laptop running ``dagster dev`` never starts work at 02:00 unasked. No sensor launches
anything on its first tick: it records what it sees as its cursor and reacts to what changes after.
"""


import json
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg

from nl2sql_assets.defs.evals import run_tags
from nl2sql_assets.defs.keys import (
    benchmark_records_key,
    case_runs_key,
    dashboard_key,
    eval_report_key,
    scoreboards_key,
)
from nl2sql_assets.defs.partitions import CONFIGS, config_pass_key, register_configs
from nl2sql_assets.defs.resources import ProjectResource
from nl2sql_assets.evaluation.running.modes import key_free_configs

NIGHTLY_CONFIGS = tuple(key_free_configs())  # plans and retrieval: no key, no cost
NIGHTLY_TAG = "nl2sql/nightly"


def build_jobs(suite_names: list[str]) -> dict[str, Any]:
    """The jobs the UI, the CLI and the automation launch, by name."""
    case_runs = dg.AssetSelection.assets(*[case_runs_key(s) for s in suite_names])
    scoreboards = dg.AssetSelection.assets(*[scoreboards_key(s) for s in suite_names])
    reports = dg.AssetSelection.assets(*[eval_report_key(s) for s in suite_names])
    records = dg.AssetSelection.assets(*[benchmark_records_key(s) for s in suite_names])
    dashboards = dg.AssetSelection.assets(*[dashboard_key(s) for s in suite_names])
    gate_checks = dg.AssetSelection.checks(*[
        dg.AssetCheckKey(scoreboards_key(s), "regression_gate_all_configs") for s in suite_names
    ])
    # everything the case runs stand on: the demo databases, each datasource's snapshot, index and
    # neighbours, each suite and its rows (on neighbours too)
    datasets = case_runs.upstream(include_self=False)
    return {
        "datasets_job": dg.define_asset_job(
            "datasets_job", selection=datasets,
            description="Demo databases, schema snapshots, suites and regenerated rows (with the drift check), "
                        "and the neighbour databases with each suite's gold on them where evals.yaml sets "
                        "neighbours."),
        # No static nl2sql/llm tag: the project's own launches tag each run by what its config's mode
        # uses (run_tags); the llm pool on the case runs caps the model calls of any run, UI ones too.
        "case_runs_job": dg.define_asset_job(
            "case_runs_job", selection=case_runs,
            description="One (config, pass) partition of case runs for every suite."),
        # The key-free pipeline's first run (defs/keyfree.py): the datasets and one partition of
        # case runs in one run, not two. The datasets are unpartitioned: their materialisations
        # carry no partition, exactly as from datasets_job; a failed dataset skips the case runs.
        "datasets_case_runs_job": dg.define_asset_job(
            "datasets_case_runs_job", selection=datasets | case_runs,
            description="datasets_job, then one (config, pass) partition of case runs, in one run "
                        "(what `nl2sql-assets pipeline run` launches first)."),
        "scoreboards_job": dg.define_asset_job(
            # Only the partitioned gate runs with a scoreboard; the all-configs one is the sensor's.
            "scoreboards_job", selection=(scoreboards | reports | dashboards) - gate_checks,
            description="A config's scoreboards (with the blocking regression gate and a point of their "
                        "history), the reports and the dashboards."),
        "benchmark_records_job": dg.define_asset_job(
            "benchmark_records_job", selection=scoreboards | records | dashboards,
            description="Scoreboards, the gate, then records (launch with record: true and a note) and the "
                        "dashboards."),
        "regression_gate_job": dg.define_asset_job(
            "regression_gate_job", selection=gate_checks,
            description="The regression gate over every stored scoreboard, without materialising anything."),
    }


def build_automation(config_path: Path, jobs: dict[str, Any]) -> list:
    """The sensors and the nightly schedule, watching the project's ``benchmarks/`` folder."""
    benchmarks = config_path.parent / "benchmarks"

    @dg.sensor(job=jobs["regression_gate_job"], minimum_interval_seconds=30,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description="A record added or changed under benchmarks/ after the sensor started runs the "
                           "regression gate once; the records already there on its first tick are not new.")
    def new_baseline_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        current = {str(p.relative_to(benchmarks)): p.stat().st_mtime
                   for p in sorted(benchmarks.rglob("*.json"))} if benchmarks.is_dir() else {}
        cursor = json.dumps(current, sort_keys=True)
        if context.cursor is None:  # first tick: what is there now is the starting point, not news
            return dg.SensorResult(cursor=cursor)
        seen: dict[str, float] = json.loads(context.cursor)
        changed = sorted(name for name, mtime in current.items() if seen.get(name) != mtime)
        if not changed:
            return dg.SensorResult(cursor=cursor)
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key="|".join(f"{n}:{current[n]}" for n in changed),
                                        tags={"nl2sql/baselines": ",".join(changed)[:200]})],
            cursor=cursor,
        )

    @dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING,
               description="Registers plans, retrieval, the shipped presets and configs/*.yaml as partitions.")
    def llm_config_sensor(context: dg.SensorEvaluationContext, project: ProjectResource) -> dg.SensorResult:
        from nl2sql_assets.evaluation.running.modes import discover_configs

        with project.open() as proj:
            names = discover_configs(proj.config)
        known = set(context.instance.get_dynamic_partitions(CONFIGS.name))
        new = [n for n in names if n not in known]
        if not new:
            return dg.SensorResult()
        return dg.SensorResult(dynamic_partitions_requests=[CONFIGS.build_add_request(new)])

    @dg.run_status_sensor(run_status=dg.DagsterRunStatus.SUCCESS, monitored_jobs=[jobs["case_runs_job"]],
                          request_job=jobs["scoreboards_job"], default_status=dg.DefaultSensorStatus.RUNNING,
                          description="After the nightly case runs of a config, its scoreboards and the gate.")
    def scoreboard_after_nightly(context: dg.RunStatusSensorContext) -> dg.RunRequest | None:
        run = context.dagster_run
        config = run.tags.get("dagster/partition/config")
        if run.tags.get(NIGHTLY_TAG) != "true" or not config:
            return None  # not a nightly run: nothing to do
        return dg.RunRequest(run_key=f"scoreboards:{run.run_id}", partition_key=config,
                             tags={NIGHTLY_TAG: "true"})

    @dg.schedule(job=jobs["case_runs_job"], cron_schedule="0 2 * * *", execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.STOPPED,
                 description="Nightly at 02:00 UTC: the key-free configs, pass 1; their scoreboards follow.")
    def nightly_keyfree(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
        when: datetime = context.scheduled_execution_time
        day = when.strftime("%Y-%m-%d")
        # The key-free configs are always partitions, even before the config sensor's first tick.
        register_configs(context.instance, list(NIGHTLY_CONFIGS))
        return [
            dg.RunRequest(run_key=f"nightly:{day}:{config}:1", partition_key=config_pass_key(config, 1),
                          tags={NIGHTLY_TAG: "true", **run_tags(config)})  # the key-free configs are their modes
            for config in NIGHTLY_CONFIGS
        ]

    return [new_baseline_sensor, llm_config_sensor, scoreboard_after_nightly, nightly_keyfree]
