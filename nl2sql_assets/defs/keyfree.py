"""The README's main job: the key-free evaluation through Dagster, in-process, on the project's instance.

It runs, in order: the datasets (demo data, snapshots, suites, regenerated rows) together with
the first key-free config's case runs (pass 1) in one run (``datasets_case_runs_job``), then that
config's scoreboards with the blocking regression gate, their history and the suite reports
(``scoreboards_job``), then each further config's case runs (``case_runs_job``) and scoreboards. The runs land in $DAGSTER_HOME,
so ``dagster dev`` shows them afterwards. A failed run stops the sequence: the runs that depend
on it would only fail too, and stay red in the UI's run list for no reason of their own.
"""


from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from nl2sql_assets.defs.automation import NIGHTLY_CONFIGS
from nl2sql_assets.defs.evals import run_tags
from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.keys import scoreboards_key
from nl2sql_assets.defs.launch import LaunchedRuns
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from nl2sql_assets.evaluation.running.heap import frozen_heap

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.reporting import EvalReport


@dataclass
class KeyFreeRun:
    ok: bool
    runs: dict[str, bool] = field(default_factory=dict)  # job[partition] -> success
    scoreboards: dict[str, dict] = field(default_factory=dict)  # "suite/config" -> metadata
    boards: dict[str, "EvalReport"] = field(default_factory=dict)  # "suite/config" -> the stored scoreboard
    checks: dict[str, bool] = field(default_factory=dict)  # check name -> passed
    stopped_after: str | None = None  # the failed run after which nothing more was started


def run_keyfree(config_path: Path, instance: dg.DagsterInstance, *, configs: tuple[str, ...] = NIGHTLY_CONFIGS,
                pass_index: int = 1, log_level: str = "WARNING") -> KeyFreeRun:
    """Run the datasets job, then each config's case runs (one pass) and scoreboards, in-process."""
    from nl2sql_assets.evaluation.history import Warehouse
    from nl2sql_assets.evaluation.reporting import load_report
    from nl2sql_assets.evaluation.running.modes import resolve_config
    from nl2sql_assets.project import load_project_config

    defs = build_defs(config_path)
    project_config = load_project_config(config_path)

    def mode_of(config: str) -> str:
        return resolve_config(config, project_config)[0]

    warehouse = Warehouse.for_project(config_path.parent)
    register_configs(instance, list(configs))
    out = KeyFreeRun(ok=True)
    suites = {scoreboards_key(Path(p).stem): Path(p).stem for p in _suite_paths(config_path)}

    # Each run is filed under its job's origin in the code location, as a UI launch is: it shows
    # on its job's page, in the jobs list and on the Overview timeline.
    launcher = LaunchedRuns(defs, instance, config_path.parent)

    def execute(job: str, partition: str | dg.MultiPartitionKey | None = None,
                tags: dict[str, str] | None = None) -> dg.ExecuteInProcessResult:
        result = launcher.execute(job, partition_key=partition, tags=tags,
                                  run_config={"loggers": {"console": {"config": {"log_level": log_level}}}})
        name = f"{job}[{partition}]" if partition else job
        out.runs[name] = result.success
        out.ok &= result.success
        if not result.success:
            out.stopped_after = name
        for evaluation in result.get_asset_check_evaluations():
            # The check's own partition: an unpartitioned check (the suite's drift check) in a
            # partitioned run (datasets_case_runs_job) has none.
            where = f"[{evaluation.partition}]" if evaluation.partition else ""
            out.checks[f"{evaluation.asset_key.to_user_string()}{where}:{evaluation.check_name}"] = evaluation.passed
        return result

    # Dagster's modules, the instance and the definitions stay alive to the end: out of the
    # garbage collector's full collections for the runs (one cost 0.2-0.3 s of CPU here).
    with frozen_heap():
        for n, config in enumerate(configs):
            # The datasets go in the first config's run of case runs (one run fewer: each run costs
            # Dagster a run record, a job snapshot and its events); a failed dataset skips them.
            job = "datasets_case_runs_job" if n == 0 else "case_runs_job"
            if not execute(job, config_pass_key(config, pass_index), run_tags(mode_of(config))).success:
                return out
            result = execute("scoreboards_job", config)
            for event in result.get_asset_materialization_events():
                mat = event.step_materialization_data.materialization
                if mat.asset_key in suites:
                    suite = suites[mat.asset_key]
                    out.scoreboards[f"{suite}/{config}"] = {k: v.value for k, v in mat.metadata.items()}
                    out.boards[f"{suite}/{config}"] = load_report(warehouse.scoreboard_path(suite, config))
            if not result.success:
                return out
        return out


def _suite_paths(config_path: Path) -> list[Path]:
    from nl2sql_assets.config import load_config

    return [Path(p) for p in load_config(config_path).evals_config.suites]
