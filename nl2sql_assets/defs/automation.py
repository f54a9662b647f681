"""Jobs, sensors and the nightly schedule.

Default status (see the README): the config sensor, the new-baseline sensor and the
scoreboard-after-case-runs sensor run by default (they only register partitions and run the
key-free gate); the nightly schedule is off until someone turns it on, so a laptop running
``dagster dev`` never starts work at 02:00 unasked.
"""


import json
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg

from nl2sql_assets.defs.evals import LLM_TAG
from nl2sql_assets.defs.partitions import CONFIGS, config_pass_key, register_configs
from nl2sql_assets.defs.resources import ProjectResource
from nl2sql_assets.evaluation.running.modes import key_free_configs

NIGHTLY_CONFIGS = tuple(key_free_configs())  # plans and retrieval: no key, no cost
NIGHTLY_TAG = "nl2sql/nightly"


def build_jobs(suite_names: list[str]) -> dict[str, Any]:
    """The jobs the UI, the CLI and the automation launch, by name."""
    case_runs = dg.AssetSelection.assets(*[dg.AssetKey(["case_runs", s]) for s in suite_names])
    scoreboards = dg.AssetSelection.assets(*[dg.AssetKey(["scoreboards", s]) for s in suite_names])
    reports = dg.AssetSelection.assets(*[dg.AssetKey(["eval_report", s]) for s in suite_names])
    records = dg.AssetSelection.assets(*[dg.AssetKey(["benchmark_records", s]) for s in suite_names])
    gate_checks = dg.AssetSelection.checks(*[
        dg.AssetCheckKey(dg.AssetKey(["scoreboards", s]), "regression_gate_all_configs") for s in suite_names
    ])
    datasets = dg.AssetSelection.groups("datasets", "suites")
    return {
        "datasets_job": dg.define_asset_job(
            "datasets_job", selection=datasets,
            description="Demo databases, schema snapshots, suites and regenerated rows (with the drift check)."),
        "case_runs_job": dg.define_asset_job(
            "case_runs_job", selection=case_runs, tags={LLM_TAG: "true"},
            description="One (config, pass) partition of case runs for every suite."),
        "scoreboards_job": dg.define_asset_job(
            # Only the partitioned gate runs with a scoreboard; the all-configs one is the sensor's.
            "scoreboards_job", selection=(scoreboards | reports) - gate_checks,
            description="A config's scoreboards (with the blocking regression gate) and the reports."),
        "benchmark_records_job": dg.define_asset_job(
            "benchmark_records_job", selection=scoreboards | records,
            description="Scoreboards, the gate, then records (launch with record: true and a note)."),
        "regression_gate_job": dg.define_asset_job(
            "regression_gate_job", selection=gate_checks,
            description="The regression gate over every stored scoreboard, without materialising anything."),
    }


def build_automation(config_path: Path, jobs: dict[str, Any]) -> list:
    """The sensors and the nightly schedule, watching the project's ``benchmarks/`` folder."""
    benchmarks = config_path.parent / "benchmarks"

    @dg.sensor(job=jobs["regression_gate_job"], minimum_interval_seconds=30,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description="A new or changed record under benchmarks/ runs the regression gate once.")
    def new_baseline_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        seen: dict[str, float] = json.loads(context.cursor) if context.cursor else {}
        current = {str(p.relative_to(benchmarks)): p.stat().st_mtime
                   for p in sorted(benchmarks.rglob("*.json"))} if benchmarks.is_dir() else {}
        changed = sorted(name for name, mtime in current.items() if seen.get(name) != mtime)
        if not changed:
            return dg.SensorResult(skip_reason="no new baseline", cursor=json.dumps(current, sort_keys=True))
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key="|".join(f"{n}:{current[n]}" for n in changed),
                                        tags={"nl2sql/baselines": ",".join(changed)[:200]})],
            cursor=json.dumps(current, sort_keys=True),
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
            return dg.SensorResult(skip_reason="every config is registered")
        return dg.SensorResult(dynamic_partitions_requests=[CONFIGS.build_add_request(new)])

    @dg.run_status_sensor(run_status=dg.DagsterRunStatus.SUCCESS, monitored_jobs=[jobs["case_runs_job"]],
                          request_job=jobs["scoreboards_job"], default_status=dg.DefaultSensorStatus.RUNNING,
                          description="After the nightly case runs of a config, its scoreboards and the gate.")
    def scoreboard_after_nightly(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
        run = context.dagster_run
        if run.tags.get(NIGHTLY_TAG) != "true":
            return dg.SkipReason("not a nightly run")
        config = run.tags.get("dagster/partition/config")
        if not config:
            return dg.SkipReason("run has no config partition")
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
                          tags={NIGHTLY_TAG: "true"})
            for config in NIGHTLY_CONFIGS
        ]

    return [new_baseline_sensor, llm_config_sensor, scoreboard_after_nightly, nightly_keyfree]
