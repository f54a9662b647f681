"""The cluster profile's Dagster glue: case_runs as split -> shards (one step each) -> merge, and
the Celery executor. Used only when ``NL2SQL_PROFILE=cluster`` (see ``nl2sql_assets.cluster``);
the embedded default builds the one-step case_runs of ``defs.evals``.

The split step stores the partition's shard plan in Postgres (``history.pg_shard_plans``: each
shard's case ids, the suite file's digest, the spend ledger); a shard step runs on whichever
Celery worker takes it, takes its cases from that plan (refusing if the suite file changed since),
stores its records in Postgres (a re-run replaces them) and draws on the plan's Postgres spend
ledger; a failed or lost shard is run again (``RetryPolicy``; a killed worker's step returns to the
queue, see ClusterSettings). The merge step first runs any planned shard that stored nothing (a
re-execution from failure skips mapped steps never started), then writes the partition's
records to the warehouse exactly as the one-step asset does, streaming them a shard at a time
(``history.pg_merge``): its memory stays flat in the partition's size.
"""


import inspect
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from nl2sql_assets.cluster.settings import ClusterSettings
from nl2sql_assets.defs.evals import (
    budget_name,
    case_runs_metadata,
    partition_config_pass,
    partition_request,
    refuse_incomplete,
)
from nl2sql_assets.defs.keys import case_runs_key, regenerated_rows_key, suite_group
from nl2sql_assets.defs.partitions import CONFIG_X_PASS
from nl2sql_assets.defs.resources import ProjectResource

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.history.pg_shard_plans import PgShardPlans, ShardPlan

WORKER_VARIABLE = "NL2SQL_WORKER"  # a worker's name in shard metadata (scripts/cluster sets it)
SHARD_RETRIES = dg.RetryPolicy(max_retries=2, delay=2)


def worker_name() -> str:
    return os.environ.get(WORKER_VARIABLE) or f"{socket.gethostname()}:{os.getpid()}"


def celery_executor(settings: ClusterSettings) -> dg.ExecutorDefinition:
    """dagster-celery's executor on the profile's broker and backend, with the workers' settings
    (``defs.celery_steps``: a step whose Celery task raised fails, rather than hanging the run)."""
    from nl2sql_assets.defs.celery_steps import celery_executor as executor

    return executor().configured({"broker": settings.broker, "backend": settings.backend,
                                "config_source": settings.celery_config()}, name="celery_executor")


def k8s_executor(settings: ClusterSettings) -> dg.ExecutorDefinition:
    """dagster-k8s' executor: each step (a shard) a Kubernetes Job. Its image, namespace,
    secrets and volumes come from the K8sRunLauncher of Dagster's Helm chart (deploy/k8s/)."""
    from dagster_k8s import k8s_job_executor

    return k8s_job_executor


#: The step executor of each shared profile (ClusterSettings.profile); imported only when chosen.
STEP_EXECUTORS: dict[str, Callable[[ClusterSettings], dg.ExecutorDefinition]] = {
    "cluster": celery_executor,
    "k8s": k8s_executor,
}


def step_executor(settings: ClusterSettings) -> dg.ExecutorDefinition:
    """The executor the profile names: Celery workers or a Kubernetes Job per step."""
    return STEP_EXECUTORS[settings.profile](settings)


def shard_plans(settings: ClusterSettings) -> "PgShardPlans":
    """The profile's shard plans in Postgres (``history.pg_shard_plans``)."""
    from nl2sql_assets.evaluation.history.pg_shard_plans import PgShardPlans

    return PgShardPlans(settings.pg_dsn, schema=settings.pg_schema)


def planned(settings: ClusterSettings, suite_name: str, context: dg.OpExecutionContext,
            plan_id: str | None = None) -> "ShardPlan":
    """The partition's stored shard plan (``plan_id``: only if still that one); a step that has
    none fails at once, without retries (running it again cannot help)."""
    from nl2sql_assets.evaluation.history.pg_shard_plans import ShardPlanError

    config, pass_index = partition_config_pass(context)
    try:
        return shard_plans(settings).require(suite_name, config, pass_index, plan_id)
    except ShardPlanError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc


def run_planned_shard(context: dg.OpExecutionContext, project: ProjectResource, settings: ClusterSettings,
                      suite_path: Path, plan: "ShardPlan", index: int) -> tuple[dict, dict]:
    """Run shard ``index`` of ``plan`` (its cases as planned, on the plan's spend ledger) and store
    its records in Postgres: (the shard's summary for the merge, its step metadata). Refuses,
    without retries, when the suite file is no longer the one planned from, before and after the
    case runs (the records say which file the run read)."""
    from nl2sql_assets.evaluation.history.pg_ledger import PgSpendLedger
    from nl2sql_assets.evaluation.history.pg_shard_plans import ShardPlanError
    from nl2sql_assets.evaluation.history.pg_shards import PgShardStore
    from nl2sql_assets.evaluation.running.shards import keep_own, shard_request

    try:
        spec = plan.shard(index)
        plan.check_suite(suite_path)
    except ShardPlanError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    ledger = PgSpendLedger(settings.pg_dsn, plan.budget, schema=settings.pg_schema,
                           stale_after_s=settings.stale_reservation_s)
    started = time.perf_counter()
    with project.open() as proj:
        request = partition_request(context, proj.config, suite_path, plan.config, plan.pass_index)
        running = time.perf_counter()
        runs = keep_own(proj.evals.run_cases(shard_request(request, spec), budget=ledger), spec)
        run_seconds = time.perf_counter() - running
    try:
        for ref in runs.meta.suites:  # the file the case runs read, should it have changed meanwhile
            plan.check_suite(suite_path, ref.digest)
        # A later split of the partition replaced the plan: this shard's records would mix in.
        shard_plans(settings).require(plan.suite, plan.config, plan.pass_index, plan.plan_id)
    except ShardPlanError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    # An outage fails this shard alone (nothing stored): a re-execution from failure runs it again.
    refuse_incomplete(runs)
    worker = worker_name()
    PgShardStore(settings.pg_dsn, schema=settings.pg_schema).write(
        plan.suite, plan.config, plan.pass_index, spec.index, spec.count, runs, worker)
    seconds = time.perf_counter() - started
    # seconds: the whole op (project open, case runs, Postgres write); run_seconds: the case runs
    # alone (scripts/bench_cluster.py splits a step's cost with them).
    metadata = {"worker": worker, "cases": len(spec.case_ids), "records": len(runs.records),
                "seconds": round(seconds, 3), "run_seconds": round(run_seconds, 3)}
    return {"index": spec.index, "count": spec.count, "worker": worker, "records": len(runs.records)}, metadata


def run_unstored_shards(context: dg.OpExecutionContext, project: ProjectResource, settings: ClusterSettings,
                        suite_name: str, suite_path: Path, shards: Sequence[dict]) -> list[dict]:
    """Before a merge: run here every planned shard with no records stored, and return the
    summaries of all the plan's shards in shard order. Why: Dagster 1.13's re-execution from
    failure does not run the mapped steps a failed run never started (its state of the parent
    run lists only steps with events; dagster-io/dagster#20925), so the merge would otherwise
    see some shards missing, or none."""
    plan = planned(settings, suite_name, context)
    missing = shard_plans(settings).unstored(plan)
    if missing:
        context.log.warning(f"{plan.partition}: shard(s) {missing} of {len(plan.shards)} planned by run "
                            f"{plan.planned_by} have no stored records (never started, or lost); the merge "
                            "runs them itself")
    by_index = {s["index"]: s for s in shards}
    for index in missing:
        by_index[index], _ = run_planned_shard(context, project, settings, suite_path, plan, index)
        context.log.info(f"{plan.partition}: recovered shard {index} ({by_index[index]['records']} records)")
    if missing:
        context.log.warning(f"{plan.partition}: recovered shard(s) {missing}: run by the merge step")
    return [by_index.get(s.index) or {"index": s.index, "count": s.count, "worker": None, "records": None}
            for s in plan.shards]


def build_sharded_case_runs(suite_name: str, suite_path: Path, index_keys: Sequence[dg.AssetKey],
                            settings: ClusterSettings) -> dg.AssetsDefinition:
    """The case_runs asset of ``suite_name`` as a graph: split into shards, run each, merge."""
    from nl2sql_assets.evaluation.history.pg_shards import PgShardStore
    from nl2sql_assets.evaluation.history.pg_warehouse import PgCaseRecords

    def store() -> PgShardStore:
        return PgShardStore(settings.pg_dsn, schema=settings.pg_schema)

    @dg.op(name=f"{suite_name}_split_cases", out=dg.DynamicOut(dict), ins={"upstream": dg.In(dg.Nothing)},
           description=f"Cuts one partition's cases into shards of {settings.shard_size} (NL2SQL_SHARD_SIZE) "
                       "and stores the plan in Postgres.")
    def split_cases(context: dg.OpExecutionContext, project: ProjectResource):
        from nl2sql_assets.evaluation.history.pg_shard_plans import ShardPlan
        from nl2sql_assets.evaluation.running.shards import plan_shards
        from nl2sql_assets.evaluation.suites import suite_digest

        config, pass_index = partition_config_pass(context)
        digest = suite_digest(suite_path)  # before reading it: a change while planning fails the shards
        with project.open() as proj:
            request = partition_request(context, proj.config, suite_path, config, pass_index)
            shards = plan_shards(request, proj.config, settings.shard_size)
        plan = ShardPlan(plan_id=uuid.uuid4().hex, suite=suite_name, config=config, pass_index=pass_index,
                         suite_digest=digest, budget=budget_name(context), planned_by=context.run_id, shards=shards)
        store().clear(suite_name, config, pass_index)  # an earlier run's shards never mix in
        shard_plans(settings).save(plan)
        context.log.info(f"{len(shards)} shard(s) of at most {settings.shard_size} case(s); plan {plan.plan_id}")
        for shard in shards:  # only where to look: each shard step reads its cases from the stored plan
            yield dg.DynamicOutput({"plan_id": plan.plan_id, "index": shard.index, "count": shard.count},
                                   mapping_key=shard.key)

    @dg.op(name=f"{suite_name}_run_shard", retry_policy=SHARD_RETRIES, pool="llm",
           description="Runs one planned shard's cases on whichever worker takes it; its records go to Postgres.")
    def run_shard(context: dg.OpExecutionContext, project: ProjectResource, shard: dict) -> dict:
        plan = planned(settings, suite_name, context, shard["plan_id"])
        summary, metadata = run_planned_shard(context, project, settings, suite_path, plan, shard["index"])
        context.add_output_metadata({**metadata, "attempt": context.retry_number + 1})
        return summary

    @dg.op(name=f"{suite_name}_merge_shards",
           description="Merges the shards' records into the partition's records in the warehouse, a shard at a time.")
    def merge_shards(context: dg.OpExecutionContext, project: ProjectResource, shards: list[dict]) -> dg.Output:
        from nl2sql_assets.evaluation.history.pg_merge import missing_shards, shards_by_worker, write_merged
        from nl2sql_assets.evaluation.reporting.report import report_from_records
        from nl2sql_assets.evaluation.running.results import CaseRuns
        from nl2sql_assets.evaluation.running.shards import merge_metas

        shards = run_unstored_shards(context, project, settings, suite_name, suite_path, shards)
        config, pass_index = partition_config_pass(context)
        expected = shards[0]["count"] if shards else 0
        # The shards' metas alone (no record parsed); the records are streamed below, a shard at a
        # time, so this step's memory is one shard's whatever the partition's size.
        shard_store = store()
        stored = shard_store.metas(suite_name, config, pass_index)
        missing = missing_shards(stored, expected)
        if missing:
            raise dg.Failure(description=f"partition {config}|{pass_index}: {missing}")
        with project.open() as proj:
            request = partition_request(context, proj.config, suite_path, config, pass_index)
        runs = CaseRuns(meta=merge_metas(request, [s.meta for s in stored]))  # the meta; records stay in Postgres
        refuse_incomplete(runs)  # an outage in any shard: the partition is not stored, as on one machine
        # The warehouse's records file and the shared copy (Postgres rows any machine reads) in one
        # pass over the shards; then Parquet beside the JSONL for DuckDB, converted from that file.
        shared = PgCaseRecords(settings.pg_dsn, schema=settings.pg_schema)
        path, _ = write_merged(shard_store, shared, project.warehouse, suite_name, config, pass_index,
                               stored, runs.meta)
        parquet = shared.export_parquet(suite_name, config, pass_index, project.warehouse.root / "parquet",
                                        records_file=path)
        shard_store.clear(suite_name, config, pass_index)
        seconds = (runs.meta.run_stamp.finished_at - runs.meta.run_stamp.started_at).total_seconds()
        # The board is built in one pass over the records file, as the one-step asset builds it.
        metadata = case_runs_metadata(runs, seconds, path, report_from_records(path, runs.meta))
        return dg.Output(None, metadata={**metadata, "shards": expected, "parquet": dg.MetadataValue.path(str(parquet)),
                                         "shards_by_worker": dg.MetadataValue.json(shards_by_worker(stored))})

    deps = [regenerated_rows_key(suite_name), *index_keys]
    names = [f"dep_{n}" for n in range(len(deps))]

    def compose(**upstream: Any) -> Any:
        return merge_shards(split_cases(upstream=list(upstream.values())).map(run_shard).collect())

    # graph_asset reads its inputs from the compose function's signature: one per upstream asset.
    compose.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])
    compose.__name__ = f"{suite_name}_case_runs_sharded"
    return dg.graph_asset(
        compose,
        key=case_runs_key(suite_name),
        ins={n: dg.AssetIn(key=k, dagster_type=dg.Nothing) for n, k in zip(names, deps, strict=True)},
        partitions_def=CONFIG_X_PASS,
        backfill_policy=dg.BackfillPolicy.multi_run(1),
        group_name=suite_group(suite_name),
        kinds={"duckdb", "celery"},
        description=f"Every approved case of {suite_name} asked once per role, for one config and pass, "
                    "in shards spread over the Celery workers; the merged case records go to the warehouse.",
    )
