"""The cluster profile for real: two Celery worker processes on the local Redis, Dagster's runs and
the shards' records in a fresh Postgres database, case_runs partitions of the Chinook and routing
suites split into shards that both workers take, records equal to the embedded in-process run, a
worker killed mid-shard, Postgres lost mid-run then a re-execution from failure, and the spend
ledger's cap held across both workers under a priced model served over HTTP."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.keys import case_runs_key
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from nl2sql_assets.evaluation.history.warehouse import Warehouse
from tests.cluster.conftest import Cluster

pytestmark = pytest.mark.slow

# plans and retrieval x 3 passes of the Chinook suite, and retrieval x 3 of the routing suite (its
# answer cases have no hand-written plans, so mode plans refuses it: CI gates it in retrieval only).
PARTITIONS = [(config, p) for config in ("plans", "retrieval") for p in (1, 2, 3)]
SUITES = {"plans": ("chinook",), "retrieval": ("chinook", "routing"), "priced": ("chinook",)}
BACKFILL = "backfill-cluster-test"


# What depends on the clock or the process: times, and ``warmup`` (the first case run of each
# process carries the one-time costs, so in a sharded run each shard's first case is a warm-up).
CLOCK = {"latency_s", "timings", "oracle_latency_s", "warmup"}


def _comparable(record: Any) -> dict[str, Any]:
    """A record without what depends on the clock."""
    data = record.model_dump(mode="json", exclude=CLOCK)
    if data.get("generated"):
        data["generated"] = {k: v for k, v in data["generated"].items() if k not in CLOCK}
    return data


def _records(project: Path, config: str, pass_index: int, suite: str = "chinook") -> list[dict[str, Any]]:
    records, _ = Warehouse.for_project(project).read_pass(suite, config, pass_index)
    return [_comparable(r) for r in records]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory, routing_template: Path) -> Path:
    """The same partitions run the embedded way (no profile, in-process): the reference."""
    import shutil

    project = tmp_path_factory.mktemp("embedded") / "demo"
    shutil.copytree(routing_template, project)
    home = tmp_path_factory.mktemp("embedded_home")
    saved = os.environ.pop("NL2SQL_PROFILE", None)
    try:
        defs = build_defs(project / "nl2sql.yaml")
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            register_configs(instance, ["plans", "retrieval"])
            assert defs.resolve_job_def("datasets_job").execute_in_process(instance=instance).success
            for config, p in PARTITIONS:
                result = defs.resolve_job_def("case_runs_job").execute_in_process(
                    instance=instance, partition_key=config_pass_key(config, p),
                    asset_selection=[case_runs_key(s) for s in SUITES[config]])
                assert result.success
    finally:
        if saved is not None:
            os.environ["NL2SQL_PROFILE"] = saved
    return project


def _launch(instance: dg.DagsterInstance, config: str, pass_index: int, tags: dict[str, str] | None = None,
            reexecute: str | None = None):
    """One case_runs partition launched the way the daemon launches it: the job rebuilt from the
    code location (nl2sql_assets.definitions), its steps sent to the Celery workers; with
    ``reexecute`` (a failed run's id), that run re-executed from failure."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    repo = ReconstructableRepository.for_module("nl2sql_assets.definitions", "defs",
                                                working_directory=str(Path.cwd()))
    job = repo.get_reconstructable_job("case_runs_job").get_subset(
        asset_selection={case_runs_key(s) for s in SUITES[config]})
    key = config_pass_key(config, pass_index)
    options = dg.ReexecutionOptions.from_failure(reexecute, instance) if reexecute else None
    return dg.execute_job(job, instance, reexecution_options=options, tags={
        "dagster/partition": str(key), "dagster/partition/config": config, "dagster/partition/pass": str(pass_index),
        "dagster/backfill": BACKFILL, **(tags or {})})


def _shard_workers(result, suite: str = "") -> list[str]:
    """The worker of every shard step (of ``suite``, else of all) that succeeded in a run."""
    workers = []
    for event in result.all_events:
        if event.event_type_value == "STEP_OUTPUT" and f"{suite}_run_shard" in (event.step_key or ""):
            metadata = event.event_specific_data.metadata
            workers.append(metadata["worker"].value)
    return workers


@pytest.fixture(scope="module")
def cluster_instance(cluster: Cluster) -> dg.DagsterInstance:
    instance = dg.DagsterInstance.get()  # DAGSTER_HOME's dagster.yaml: storage on Postgres
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    register_configs(instance, ["plans", "retrieval"])
    defs = build_defs(cluster.project / "nl2sql.yaml")
    assert defs.resolve_job_def("datasets_job").execute_in_process(instance=instance).success
    return instance


def _materializations(result) -> dict[str, Any]:
    """Each suite's case_runs materialisation of a run, by suite name."""
    mats = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    return {m.asset_key.path[0]: m for m in mats if m.asset_key.path[-1] == "case_runs"}


def test_backfill_spreads_shards_over_both_workers_and_matches_the_in_process_run(
        cluster: Cluster, cluster_instance: dg.DagsterInstance, in_process: Path):
    from nl2sql_assets.evaluation.history.pg_warehouse import PgCaseRecords

    workers: list[str] = []
    for config, p in PARTITIONS:
        result = _launch(cluster_instance, config, p)
        assert result.success, f"{config}|{p} failed; worker logs under {cluster.logs}"
        workers += _shard_workers(result)
        mats = _materializations(result)
        assert sorted(mats) == sorted(SUITES[config])
        for suite in SUITES[config]:
            assert mats[suite].metadata["shards"].value == len(_shard_workers(result, suite)) >= 1
            cluster_records = _records(cluster.project, config, p, suite)
            assert cluster_records, f"{suite} {config}|{p}: no records"
            assert cluster_records == _records(in_process, config, p, suite), \
                f"{suite} {config}|{p} differs from the in-process run"
            keys = [(r["case_id"], r["role"], r["config"], r["pass_index"]) for r in cluster_records]
            assert len(keys) == len(set(keys))  # nothing counted twice
            # The shared copy: the same records in Postgres, and in Parquet for DuckDB.
            pg_records, _ = PgCaseRecords(os.environ["NL2SQL_PG_DSN"]).read_pass(suite, config, p)
            assert [_comparable(r) for r in pg_records] == cluster_records
            assert Path(mats[suite].metadata["parquet"].value).is_file()
        assert len(_shard_workers(result)) > len(SUITES[config])  # some suite was cut into several shards
    import duckdb

    pattern = (Warehouse.for_project(cluster.project).root / "parquet" / "**" / "*.parquet").as_posix()
    counts = dict(duckdb.connect().execute(
        f"SELECT suite || ' ' || config || '|' || pass_index, count(*) "
        f"FROM read_parquet('{pattern}', hive_partitioning = true, union_by_name = true) GROUP BY ALL").fetchall())
    assert counts == {f"{s} {c}|{p}": len(_records(in_process, c, p, s)) for c, p in PARTITIONS for s in SUITES[c]}
    assert set(workers) == {"w1", "w2"}, f"shards by worker: {workers}"
    assert min(workers.count("w1"), workers.count("w2")) >= 2
    # The runs are in Postgres, where any webserver or daemon of the cluster sees them.
    runs = cluster_instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": BACKFILL}))
    assert len(runs) == len(PARTITIONS)
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)


def test_a_worker_killed_mid_shard_is_replaced_and_nothing_is_lost_or_doubled(
        cluster: Cluster, cluster_instance: dg.DagsterInstance, in_process: Path):
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["result"] = _launch(cluster_instance, "plans", 2, tags={"dagster/backfill": "killed-worker"})

    log = cluster.logs / "w1.log"
    marker = 'STEP_START - Started execution of step "chinook__case_runs.chinook_run_shard'
    before = log.read_text(errors="replace").count(marker)
    thread = threading.Thread(target=run, daemon=True)  # a stuck run must not keep pytest alive
    thread.start()
    deadline = time.monotonic() + 120
    # Kill w1 (SIGKILL, its whole process group) the moment it starts a shard of this run: a
    # shard's case runs take far longer than one poll, so the step dies half done. (Waiting
    # longer let w1 finish a small shard first once the LLM wire got faster.)
    while log.read_text(errors="replace").count(marker) == before:
        assert time.monotonic() < deadline, "w1 never started a shard"
        time.sleep(0.02)
    cluster.kill("w1")
    cluster.start_worker("w3")  # the machine is replaced, as an autoscaler would
    thread.join(timeout=240)
    assert not thread.is_alive(), "the run did not finish after its worker was killed"
    result = outcome["result"]
    assert result.success
    workers = _shard_workers(result)
    assert "w1" not in workers  # w1 died in its first shard of this run: the others did every shard
    records = _records(cluster.project, "plans", 2)
    assert records == _records(in_process, "plans", 2)
    keys = [(r["case_id"], r["role"]) for r in records]
    assert len(keys) == len(set(keys))
    # The killed shard started twice (on w1, then again on w2); every shard finished once.
    starts = [e.dagster_event.step_key for e in cluster_instance.all_logs(
        result.run_id, of_type=dg.DagsterEventType.STEP_START) if "run_shard" in (e.dagster_event.step_key or "")]
    successes = [e.dagster_event.step_key for e in cluster_instance.all_logs(
        result.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS) if "run_shard" in (e.dagster_event.step_key or "")]
    assert len(successes) == len(set(successes)) == len(workers)
    assert len(starts) > len(set(starts)) == len(successes), starts


def _step_failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [str(e.dagster_event.event_specific_data.error_display_string)
            for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]


def test_postgres_lost_mid_run_fails_it_clearly_and_a_reexecution_from_failure_finishes(
        cluster: Cluster, cluster_instance: dg.DagsterInstance, in_process: Path):
    """Our tables' Postgres goes away when the first shard starts (every connection dropped, new
    ones refused: a restart as its clients see it) and comes back once the run has given up on a
    step. The run fails, naming Postgres; re-executed from failure it finishes, with the
    in-process run's records, each once."""
    from nl2sql_assets.evaluation.history.pg_shards import PgShardStore

    config, p, backfill = "retrieval", 2, "postgres-restart"
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["result"] = _launch(cluster_instance, config, p, tags={"dagster/backfill": backfill})

    logs = [cluster.logs / f"{name}.log" for name in cluster.workers]
    shard_start = re.compile(r'STEP_START - Started execution of step "\w+_case_runs\.\w+_run_shard')

    def shard_starts() -> int:
        return sum(len(shard_start.findall(log.read_text(errors="replace"))) for log in logs)

    before = shard_starts()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while shard_starts() == before:
        assert time.monotonic() < deadline, "no shard started"
        time.sleep(0.02)
    cluster.pg_port.stop()
    try:  # Postgres stays away until the run has given up on a step (a shard's retries, or the merge)
        (run_record,) = cluster_instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill}))
        while not _step_failures(cluster_instance, run_record.run_id):
            assert time.monotonic() < deadline, "no step failed while Postgres was away"
            time.sleep(0.2)
    finally:
        cluster.pg_port.start()
    thread.join(timeout=180)
    assert not thread.is_alive(), "the run did not end after Postgres came back"
    failed = outcome["result"]
    assert not failed.success
    messages = _step_failures(cluster_instance, failed.run_id)
    assert messages and all("PostgreSQL at 127.0.0.1:" in m and "unavailable" in m for m in messages), messages
    assert any("re-execute the run from failure" in m for m in messages)

    retried = _launch(cluster_instance, config, p, tags={"dagster/backfill": backfill}, reexecute=failed.run_id)
    assert retried.success, f"the re-execution failed; worker logs under {cluster.logs}"
    assert retried.dagster_run.parent_run_id == failed.run_id
    # Shards that finished in the failed run are kept, not run again.
    done_before = {e.dagster_event.step_key for e in cluster_instance.all_logs(
        failed.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)}
    done_again = {e.dagster_event.step_key for e in cluster_instance.all_logs(
        retried.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)}
    assert not done_before & done_again
    for suite in SUITES[config]:
        records = _records(cluster.project, config, p, suite)
        assert records == _records(in_process, config, p, suite), f"{suite} {config}|{p} differs after the restart"
        keys = [(r["case_id"], r["role"]) for r in records]
        assert len(keys) == len(set(keys))
        assert PgShardStore(os.environ["NL2SQL_PG_DSN"]).read(suite, config, p) == []  # merged and cleared


def test_a_priced_backfill_holds_the_spend_cap_across_both_workers(
        cluster: Cluster, cluster_instance: dg.DagsterInstance, outside_ci: None):
    """Mode full on a fake provider over real HTTP (priced by its own token count): every worker's
    engine calls it from its own process. The partition's shards, on both workers at once, draw on
    the backfill's Postgres ledger with a low cap: the run stops at the cap, passing it by at most
    one case per worker, and the ledger's spend is exactly what the records cost."""
    import yaml

    from nl2sql_assets.defs.evals import BUDGET_TAG
    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.evaluation.history.pg_ledger import PgSpendLedger
    from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
    from nl2sql_assets.evaluation.suites import load_suite

    cases = load_suite(cluster.project / "suites" / "chinook.yaml").cases
    backfill, cap = "priced-backfill", 0.30
    with FlakyLLMServer(cases, EventBus()) as server:
        (cluster.project / "configs").mkdir(exist_ok=True)
        (cluster.project / "configs" / "priced.yaml").write_text(yaml.safe_dump({
            "default": {"model": "openai/fake-provider", "api_base": server.base_url, "api_key": "x",
                        "max_retries": 0, "timeout_s": 20},
            "prices": {"fake-provider": {"input": 5.0, "output": 20.0, "source": "test"}}}))
        register_configs(cluster_instance, ["priced"])
        results = [_launch(cluster_instance, "priced", 1, tags={"dagster/backfill": backfill, BUDGET_TAG: str(cap)})]
        answered = server.requests
    assert all(r.success for r in results), f"a priced partition failed; worker logs under {cluster.logs}"
    assert answered > 0  # the workers' engines called the fake provider

    costs = []
    for suite in SUITES["priced"]:
        records, meta = Warehouse.for_project(cluster.project).read_pass(suite, "priced", 1)
        assert meta is not None and meta["request"]["mode"] == "full"
        costs += [r.cost_usd + (r.generated.cost_usd if r.generated else 0.0) for r in records]
    totals = PgSpendLedger(os.environ["NL2SQL_PG_DSN"], backfill).totals()
    spent, most = sum(costs), max(costs)
    assert most > 0
    assert totals["spent"] == pytest.approx(spent)  # the ledger holds exactly what the records cost
    assert totals["open"] == 0  # every reservation settled
    assert spent + most > cap  # it stopped only when the next case might not fit ...
    assert spent <= cap + 2 * most  # ... and passed the cap by at most one case per worker (2 workers)
    stopped = [m.metadata["stopped"].value for r in results for m in _materializations(r).values()]
    assert "max_cost" in stopped
    workers = dict.fromkeys(cluster.workers, 0)  # the two workers now up (one replaced an earlier one)
    assert len(workers) == 2
    for result in results:
        for event in result.all_events:
            if event.event_type_value == "STEP_OUTPUT" and "run_shard" in (event.step_key or ""):
                metadata = event.event_specific_data.metadata
                workers[metadata["worker"].value] = workers.get(metadata["worker"].value, 0) + 1
    assert all(workers.values()), f"shards by worker: {workers}"
