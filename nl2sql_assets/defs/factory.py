"""Builds the Definitions for one project (nl2sql.yaml): every suite it names gets its assets."""


from pathlib import Path

import dagster as dg

from nl2sql_assets.config import load_config
from nl2sql_assets.defs.automation import build_automation, build_jobs
from nl2sql_assets.defs.datasets import build_schema_snapshots, build_suite_assets, demo_datasets
from nl2sql_assets.defs.evals import build_eval_assets, build_gate_all_check
from nl2sql_assets.defs.resources import ProjectResource


def build_defs(config_path: str | Path) -> dg.Definitions:
    config_path = Path(config_path).resolve()
    config = load_config(config_path)
    suites = [(Path(p).stem, Path(p)) for p in config.evals_config.suites]
    assets: list = [demo_datasets, build_schema_snapshots(config)]
    checks: list = []
    for name, path in suites:
        suite_asset, rows, drift = build_suite_assets(name, path, config)
        case_runs, scoreboard, gate, report, records = build_eval_assets(name, path)
        assets += [suite_asset, rows, case_runs, scoreboard, report, records]
        checks += [drift, gate, build_gate_all_check(name)]
    jobs = build_jobs([name for name, _ in suites])
    automation = build_automation(config_path, jobs)
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=list(jobs.values()),
        sensors=[a for a in automation if isinstance(a, dg.SensorDefinition)],
        schedules=[a for a in automation if isinstance(a, dg.ScheduleDefinition)],
        resources={"project": ProjectResource(config_path=str(config_path))},
        executor=dg.in_process_executor,
    )
