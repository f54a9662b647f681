"""Builds the Definitions for one project (nl2sql.yaml): every suite it names gets its assets."""


import warnings
from pathlib import Path

import dagster as dg

from nl2sql_assets.cluster.settings import cluster_profile
from nl2sql_assets.defs.automation import build_automation, build_jobs
from nl2sql_assets.defs.cluster import build_sharded_case_runs, step_executor
from nl2sql_assets.defs.datasets import build_schema_snapshots, build_suite_assets, demo_datasets
from nl2sql_assets.defs.evals import build_eval_assets, build_gate_all_check
from nl2sql_assets.defs.keys import check_groups
from nl2sql_assets.defs.neighbours import build_neighbour_assets
from nl2sql_assets.defs.resources import ProjectResource, database_secrets
from nl2sql_assets.defs.schema_index import build_schema_index, schema_index_keys
from nl2sql_assets.defs.thresholds import build_threshold_check
from nl2sql_assets.project import load_project_config


def build_defs(config_path: str | Path) -> dg.Definitions:
    """Every asset, check, job, sensor and schedule for the project at ``config_path``."""
    # Two features we rely on on purpose warn on every load: backfill_policy (beta) and a
    # partitioned asset check (preview). Both are pinned by the exact dagster version.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*`backfill_policy`.*")
        warnings.filterwarnings("ignore", message=r".*partitions_def on an AssetCheckSpec.*")
        return _build_defs(Path(config_path).resolve())


def _build_defs(config_path: Path) -> dg.Definitions:
    config = load_project_config(config_path)
    cluster = cluster_profile()  # None: the embedded default (SQLite, in-process)
    suites = [(Path(p).stem, Path(p)) for p in config.evals_config.suites]
    check_groups([name for name, _ in suites], [ds.id for ds in config.datasources])
    assets: list = [demo_datasets, build_schema_snapshots(config), build_schema_index(config)]
    neighbour_assets, neighbour_deps = build_neighbour_assets(config, suites)
    assets += neighbour_assets
    checks: list = []
    for name, path in suites:
        suite_asset, rows, drift = build_suite_assets(name, path, config)
        upstream = [*schema_index_keys(config), *neighbour_deps.get(name, [])]
        case_runs, scoreboard, gate, history, report, records, dashboard = build_eval_assets(name, path, upstream)
        if cluster is not None:
            case_runs = build_sharded_case_runs(name, path, upstream, cluster)
        assets += [suite_asset, rows, case_runs, scoreboard, history, report, records, dashboard]
        checks += [drift, gate, build_gate_all_check(name), build_threshold_check(name)]
    jobs = build_jobs([name for name, _ in suites])
    automation = build_automation(config_path, jobs)
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=list(jobs.values()),
        sensors=[a for a in automation if isinstance(a, dg.SensorDefinition)],
        schedules=[a for a in automation if isinstance(a, dg.ScheduleDefinition)],
        resources={"project": ProjectResource(config_path=str(config_path), secrets=database_secrets(config))},
        executor=dg.in_process_executor if cluster is None else step_executor(cluster),
    )
